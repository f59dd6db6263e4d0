import sys

from rankone.cli import entry

if __name__ == "__main__":
    sys.exit(entry())
