"""Training algorithms as pure functions on tensors (composer style), with thin wrappers for modules."""
