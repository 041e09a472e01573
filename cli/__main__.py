"""``python -m calopt_cli``: the same as the ``calopt`` console script."""

from calopt_cli import main

if __name__ == "__main__":
    main()
