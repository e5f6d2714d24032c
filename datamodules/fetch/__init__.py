"""`bioablate data fetch`: the BLURB data and vocabularies from their pinned public origins (see
`manifest.py` for the manifest, `fetch.py` for how files are downloaded, verified and installed)."""

from datamodules.fetch.download import ChecksumError, DiskFullError, DownloadError, FetchError
from datamodules.fetch.fetch import MARKER_FILE, FetchResult, fetch_data, fetched_data_dir, summary
from datamodules.fetch.manifest import default_data_dir, load_manifest

__all__ = ["ChecksumError", "DiskFullError", "DownloadError", "FetchError", "FetchResult", "MARKER_FILE",
           "default_data_dir", "fetch_data", "fetched_data_dir", "load_manifest", "summary"]
