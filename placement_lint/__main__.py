from placement_lint.cli import main

main()
