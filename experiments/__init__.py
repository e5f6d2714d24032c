"""The YAML files that ship with bioablate: one experiment per paper table (*.yaml), profiles/, models/
(shared model definitions), corpora/ and sweeps/. No code: this file makes the folder a package, so the
files travel inside the wheel as package data; `core.packaged` finds them (`bioablate list experiments`)."""
