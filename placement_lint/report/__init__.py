"""Report: turn a run's findings into text for people (full, concise, grouped) or for tools and CI
(json, json-lines, sarif, github, gitlab, junit); `formats.py` lists them."""
