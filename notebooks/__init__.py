"""The report notebook (ablation_report.ipynb), a package so that it travels inside the wheel (package data)
as the `ui` extra promises: `python -c "import notebooks, pathlib; print(pathlib.Path(notebooks.__file__).parent)"`
names where an installed copy lies."""
