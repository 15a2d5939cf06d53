from placement_lint.cli import console

console()
