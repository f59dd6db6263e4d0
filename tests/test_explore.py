"""The exploration floor (rl.explore, rankone.train.explore): which rows it replaces, what it puts
there, the log-probs it gives them, and an RL run that uses it."""

import pytest
import torch

from rankone.models.load import load_base, make_policy
from rankone.models.sequences import completion_logprobs, encode_completions
from rankone.rollouts import make_engine
from rankone.tasks.facts import Facts, FactsParams
from rankone.train.explore import ExplorationFloor


def test_facts_list_every_value_up_to_the_cap():
    assert Facts.answer_space(FactsParams(n_facts=64, digits=1, alphabet=2, n_val=8, n_test=8)) == ["0", "1"]
    space = Facts.answer_space(FactsParams(n_facts=64, digits=2, n_val=8, n_test=8))
    assert len(space) == 100 and space[0] == "00" and space[-1] == "99" and len(set(space)) == 100
    assert Facts.answer_space(FactsParams(n_facts=64, digits=5, n_val=8, n_test=8)) is None  # 100,000 values


def test_the_floor_draws_a_seeded_share_uniformly():
    floor = ExplorationFloor(0.25, ["0", "1"], tokenizer=None, score=None, seed=3)
    picks = floor.draw(4000, step=5, round_=0)
    assert picks == floor.draw(4000, step=5, round_=0)  # a resumed run draws the same
    assert picks != floor.draw(4000, step=6, round_=0) and picks != floor.draw(4000, step=5, round_=1)
    assert abs(len(picks) / 4000 - 0.25) < 0.03
    assert abs(sum(v == "1" for v in picks.values()) / len(picks) - 0.5) < 0.05
    assert ExplorationFloor(0.25, ["0", "1"], None, None, seed=4).draw(4000, 5, 0) != picks


def test_replaced_rows_hold_the_answer_and_the_policys_own_logprobs(study):
    cfg, at = study
    model, tokenizer = load_base(at.model(cfg.models[0]))
    policy = make_policy(model, "fullft", cfg.lora, "all-linear")
    engine = make_engine("hf", policy, tokenizer, 1.0, 4)
    torch.manual_seed(0)
    samples = engine.sample(["abcd:", "wxyz:"], 8)

    def score(s):
        with torch.no_grad():
            return completion_logprobs(
                policy, s.prompt_ids_B_L, s.prompt_mask_B_L, s.completion_B_C, s.completion_mask_B_C
            )

    space = ["1234567", "42"]  # one answer longer than anything sampled: the completions widen
    floor = ExplorationFloor(0.5, space, tokenizer, score, seed=0)
    out, explored_B = floor.apply(samples, step=0, round_=0)
    rows = sorted(floor.draw(16, 0, 0))
    assert explored_B.nonzero().flatten().tolist() == rows and 0 < len(rows) < 16
    width = samples.completion_B_C.shape[1]
    assert out.completion_B_C.shape[1] >= width
    for i in range(16):
        if i in rows:
            assert out.texts[i] in space and out.finish_reasons[i] == "stop"
            ids, mask = encode_completions(tokenizer, [out.texts[i]])
            n = int(mask.sum())
            assert out.completion_B_C[i, :n].tolist() == ids[0, :n].tolist()
            assert int(out.completion_mask_B_C[i].sum()) == n
        else:  # untouched, but for padding
            assert out.texts[i] == samples.texts[i]
            assert torch.equal(out.completion_B_C[i, :width], samples.completion_B_C[i])
            assert torch.equal(out.sampler_logprobs_B_C[i, :width], samples.sampler_logprobs_B_C[i])
    fresh = score(out)
    assert torch.allclose(out.sampler_logprobs_B_C[rows], fresh[rows])  # the ratio is 1 on them
    assert (out.sampler_logprobs_B_C[rows] * out.completion_mask_B_C[rows]).sum() < 0


@pytest.mark.parametrize("explore", [0.0, 0.5])
def test_an_rl_run_with_the_floor_learns_from_its_rows_and_logs_them(study, tmp_path, explore):
    from rankone.config import RunId, validate
    from rankone.io import read_jsonl
    from rankone.train import TRAINERS
    from tests.conftest import smoke_dict

    base, at = study
    facts = smoke_dict()["tasks"]["sft"]  # a table whose 100 values the floor can list
    rl = {"steps": 4, "prompts_per_step": 4, "group_size": 4, "log_every": 4, "explore": explore}
    cfg = validate(
        smoke_dict(
            results_dir=base.results_dir,
            experiment=base.experiment,
            tasks={**smoke_dict()["tasks"], "rl": facts},
            rl=rl,
            levers=None,  # its calibration lever needs a task that states a confidence
        )
    )
    run = RunId.parse("rl/qwen3-tiny/fullft/lr0.001/seed0")
    info = TRAINERS["rl"](cfg, run, at.model(run.model), at.data("sft"), tmp_path / "run")
    assert info["status"] == "completed"
    steps = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    if not explore:
        assert all("explored_share" not in s for s in steps)
        return
    assert all(0 < s["explored_share"] < 1 for s in steps)
    assert sum(s["explored_share"] for s in steps) / len(steps) == pytest.approx(0.5, abs=0.2)
    assert all(s["logprob_gap_mean"] < 1e-4 for s in steps)  # the floor's rows score as the learner's
