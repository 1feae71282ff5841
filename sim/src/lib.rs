//! The cluster simulator's foundations (SIMULATED: nothing here runs a model): workloads
//! ([`trace`]: the documented CSV trace format and the Proteus Twitter traces; [`generate`]:
//! Poisson, Gamma, step, burst and diurnal arrivals) and the catalogue of measured profiles
//! ([`catalogue`]: the Proteus catalogue read into the scheduler's variant entries). The
//! discrete-event engine that runs the scheduler's policies over them is not built yet.

pub mod catalogue;
pub mod generate;
pub mod trace;
