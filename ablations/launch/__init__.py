"""Running the toolkit's work as SLURM jobs (`--launcher slurm`), through submitit; see docs/cluster.md.

- `slurm`: executors from the `launcher` config block, job records, scheduler states;
- `jobs`: what a job calls (one planned run of an experiment; a `bioablate` command line);
- `experiment`: submit an experiment's missing runs (stages, then job arrays of cells), wait, status;
- `commands`: sweep workers and multi-node pretraining as jobs.
"""

from ablations.launch.commands import submit_pretraining, submit_sweep_workers
from ablations.launch.experiment import Submission, records_for, status_lines, submit_experiment, wait_for
from ablations.launch.slurm import check_shared_store

__all__ = ["Submission", "check_shared_store", "records_for", "status_lines", "submit_experiment",
           "submit_pretraining", "submit_sweep_workers", "wait_for"]
