//! udamon as a service (`udamon run CONFIG`): jobs from one config file,
//! each a target, a path, attributes, schemes and guardrails; sessions that
//! follow processes as they come and go; online reload (SIGHUP, `udamon
//! ctl reload`); a Prometheus endpoint; a control socket; systemd's
//! notifications and watchdog; structured logs.

pub mod config;
pub mod guard;
pub mod http;
pub mod job;
pub mod log;
pub mod metrics;
pub mod presets;
pub(crate) mod records;
pub mod service;
pub mod status;
pub(crate) mod trust;

pub use config::{ConfigError, Plan};
pub use service::{check, ctl_request, run, Check, Error, Options, Verdict};
