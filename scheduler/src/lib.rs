//! Policies as pure functions over snapshots (variant selection, autoscaling, planning).
