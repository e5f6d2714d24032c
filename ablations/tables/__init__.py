"""Paper-style tables from an experiment's runs (or, for Tables 1 and 8, from the staged vocabularies).

stats.py computes the numbers (`table_data`), render.py writes them as markdown, LaTeX or CSV, plot.py draws
the figure, provenance.py says what produced them, publish.py writes the files and logs them to MLflow, and
report.py runs an experiment's table end to end and reads the tables back for the report notebook. The names
below are what the CLI and the notebook use.
"""

from ablations.tables.publish import TABLE_KIND, TABLE_MLFLOW_EXPERIMENT, find_table_run
from ablations.tables.render import FORMATS, Grid, render, render_data, render_grid
from ablations.tables.report import experiments_markdown, render_experiment, report_tracking_uri, stored_tables
from ablations.tables.stats import TableData, table_data
from ablations.tables.vocab_grids import table1_grid, table8_grid

__all__ = ["FORMATS", "TABLE_KIND", "TABLE_MLFLOW_EXPERIMENT", "Grid", "TableData", "experiments_markdown",
           "find_table_run", "render", "render_data", "render_experiment", "render_grid", "report_tracking_uri",
           "stored_tables", "table1_grid", "table8_grid", "table_data"]
