"""A launch script's option loop stepped through for the words a README gives it (context/shell_options.py)."""

from __future__ import annotations

from placement_lint.context.shell_options import run_option_loop

LOOP = """#!/bin/bash
ZERO=2
GPUS=8
while [[ $# -gt 0 ]]; do
  key="$1"
  case $key in
    -z|--zero)
      ZERO="$2"
      shift 2
      ;;
    --gpus=*) GPUS="${1#*=}"; shift ;;
    --offload) OFFLOAD=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option $1"; exit 1 ;;
  esac
done
torchrun --nproc_per_node $GPUS train.py --deepspeed configs/zero${ZERO}.json
"""


def test_option_loop_assignments_replace_the_loop_line_for_line() -> None:
    ran = run_option_loop(LOOP, ["--zero", "3", "--gpus=4", "--offload"])
    assert ran is not None
    lines = ran.text.split("\n")
    assert len(lines) == len(LOOP.split("\n"))
    assert lines[3] == "ZERO=3; GPUS=4; OFFLOAD=true"
    assert all(line == "" for line in lines[4:16])
    assert lines[16].startswith("torchrun") and ran.positional == []


def test_option_loop_word_no_arm_takes_or_that_exits_leaves_the_script_unread() -> None:
    assert run_option_loop(LOOP, ["--zero", "3", "--unknown"]) is None
    assert run_option_loop(LOOP, ["--help"]) is None


def test_shift_after_the_case_and_positional_words_left() -> None:
    text = 'while [ "$#" -gt 0 ]; do\n  case "$1" in\n    --stage) STAGE=$2; shift ;;\n  esac\n  shift\ndone\necho $1\n'
    ran = run_option_loop(text, ["--stage", "3", "extra"])
    assert ran is not None and ran.text.split("\n")[0] == "STAGE=3" and ran.positional == []


def test_shift_outside_the_loop_is_not_followed() -> None:
    text = 'MODE=$1\nshift\nwhile [[ $# -gt 0 ]]; do case "$1" in --z) Z=$2; shift 2 ;; esac; done\n'
    assert run_option_loop(text, ["train", "--z", "3"]) is None


def test_getopts_with_clustered_and_separate_values() -> None:
    text = 'STAGE=2\nwhile getopts "s:n:v" opt; do\n  case $opt in\n    s) STAGE=$OPTARG ;;\n    n) NGPU="$OPTARG" ;;\n    v) VERBOSE=1 ;;\n  esac\ndone\nshift $((OPTIND - 1))\ndeepspeed --num_gpus $NGPU train.py "$@"\n'
    ran = run_option_loop(text, ["-vs3", "-n", "8", "rest.yaml"])
    assert ran is not None
    lines = ran.text.split("\n")
    assert lines[1] == "VERBOSE=1; STAGE=3; NGPU=8" and lines[8] == "" and ran.positional == ["rest.yaml"]
    assert run_option_loop(text, ["-x"]) is None  # an option the script does not take


def test_a_loop_the_tool_cannot_end_is_not_guessed() -> None:
    text = 'while [[ $# -gt 0 ]]; do\n  case "$1" in\n    --z) Z=$2 ;;\n  esac\ndone\n'
    assert run_option_loop(text, ["--z", "3"]) is None


def test_option_loop_append_is_not_taken_as_an_assignment() -> None:
    script = LOOP.replace("--offload) OFFLOAD=true; shift ;;", '--extra) EXTRA+=" $2"; shift 2 ;;')
    ran = run_option_loop(script, ["--zero", "3", "--extra", "x"])
    assert ran is not None
    assert ran.text.split("\n")[3] == "ZERO=3"
