//! udamon's command line, defined once: doc comments are the help text,
//! and the binary makes its man pages and shell completions from
//! [`Cli::command`](clap::CommandFactory::command).
//!
//! Role: the clap types of every subcommand and flag, their value parsers,
//! and the conversions of flags into library types ([`AttrsArgs::attrs`],
//! [`ScoreArgs::options`], [`TuneArgs::budget`], [`SelectArgs::time_range`],
//! ...). A flag value that cannot be used is a [`UsageError`] naming the
//! flag. Nothing here reads a file or runs anything: the `udamon` binary
//! parses, calls one library entry point per command and prints.

use std::io::IsTerminal;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use udamon_core::units::{
    parse_address, parse_duration_us, parse_range, parse_size, Fraction, UnitError, UnitErrorKind,
};
use udamon_core::{Attrs, IntervalsGoal};
use udamon_report::heatmap::{HEIGHT_RANGE, WIDTH_RANGE};
use udamon_report::{HeatmapFormat, HotOptions, ImageOptions, WssOptions};
use udamon_session::OpsChoice;

/// A usage or input error (bad flag value, bad spec, bad file): exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A duration flag's value (`5ms`, `10s`), in microseconds.
pub fn duration_arg(flag: &str, s: &str) -> Result<u64, UsageError> {
    parse_duration_us(s, Fraction::Round).map_err(|m| UsageError(format!("--{flag}: {m}")))
}

/// Parses "START-END" with `parse` for each side.
fn range_arg(
    flag: &str,
    s: &str,
    parse: impl Fn(&str) -> Result<u64, UnitError>,
) -> Result<(u64, u64), UsageError> {
    parse_range(s, parse).map_err(|e| match e.kind {
        // The range as a whole: its message names it.
        UnitErrorKind::NotARange | UnitErrorKind::EmptyRange => UsageError(format!("--{flag} {e}")),
        _ => UsageError(format!("--{flag}: {e}")),
    })
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and NO_COLOR is not set.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stdout().is_terminal()
            }
        }
    }
}

/// Data access monitoring and access-aware memory management (DAMON and
/// DAMOS) in user space.
#[derive(Parser, Debug)]
#[command(
    name = "udamon",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record a built-in simulated workload and show what udamon sees:
    /// heatmap, working set size and accuracy against the exact truth
    Demo(DemoArgs),
    /// Monitor a workload and write its access pattern to a record file
    Record(RecordArgs),
    /// Run a workload with access-aware schemes and compare it with a run
    /// without them
    Apply(ApplyArgs),
    /// Work with scheme files
    #[command(subcommand)]
    Schemes(SchemesCommand),
    /// Read a record file and report on it
    #[command(subcommand)]
    Report(ReportCommand),
    /// Show what this machine offers udamon (read-only probing)
    Features(FeaturesArgs),
    /// Show what the kernel's DAMON_STAT module (Linux 6.17+) says of all
    /// physical memory: estimated bandwidth and idle-time percentiles
    /// (read-only: udamon never enables or configures it)
    DamonStat(DamonStatArgs),
    /// Measure udamon's own speed, record size and accuracy
    Bench(BenchArgs),
    /// Tune one number of a scheme for a workload (DAOS auto-tuning)
    Tune(TuneArgs),
    /// Predict what schemes would do to a recorded workload (what-if replay)
    Replay(ReplayArgs),
    /// Run workloads under monitoring configurations (orig, rec, prec, thp,
    /// ethp, prcl, damo-rec, ...), repeated, and report each one's overhead
    /// against orig, as DAMON's evaluation harness does
    Eval(EvalArgs),
    /// Convert a damo record (json, json_compressed or perf-script text)
    /// into a udamon record, for every udamon report
    Import(ImportArgs),
    /// Convert a udamon record into a damo record (json_compressed, json or
    /// perf-script text), for damo's reports and scripts
    Export(ExportArgs),
    /// Keep part of a record (a time range, an address range, one target)
    /// as a record of its own
    Cut(CutArgs),
    /// Write a record's hot objects as placement hints (mlock, or a NUMA
    /// node) for the program's next run, or as mlock schemes
    Hints(HintsArgs),
    /// Remove a kdamond that a udamon run created and left behind when it
    /// died (proved by its claim; anything else is never touched)
    Cleanup(CleanupArgs),
    /// Show the machine's NUMA nodes, memory tiers and the node pairs that
    /// memory tiering works on (read-only), and write tiering schemes for
    /// them
    Topology(TopologyArgs),
    /// Run as a service: the jobs of a config file, until SIGTERM (SIGHUP
    /// reloads the file); Prometheus metrics and a control socket
    Run(RunArgs),
    /// Ask a running service (`udamon run`) for its status, or to reload
    Ctl(CtlArgs),
    /// Print shell completions for SHELL to stdout
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of udamon or of one of its subcommands to
    /// stdout, or write every page into a directory
    Man(ManArgs),
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// The suite file (TOML): workloads, configurations, repeats (see
    /// docs/evaluation.md)
    pub suite: PathBuf,
    /// Results directory; each run is saved there as it ends, and running
    /// the same command again resumes where it stopped
    #[arg(short, long, value_name = "DIR", default_value = "udamon-eval")]
    pub output: PathBuf,
    /// Only this workload (repeat the flag, or give a comma-separated list)
    #[arg(long = "workload", value_name = "NAME", value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Only this configuration (repeat the flag, or give a comma-separated list)
    #[arg(long = "config", value_name = "NAME", value_delimiter = ',')]
    pub configs: Vec<String>,
    /// Repeat each run N times instead of the suite's `repeats`
    #[arg(long, value_name = "N")]
    pub repeats: Option<u32>,
    /// Run again the runs whose saved result failed
    #[arg(long, conflicts_with = "report")]
    pub retry_failed: bool,
    /// Run nothing: summarise the results saved in --output
    #[arg(long)]
    pub report: bool,
    /// Print the summary as JSON
    #[arg(long)]
    pub json: bool,
    /// Read and write /sys (the THP setting) under this root instead of /
    /// (tests)
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// The subcommand whose page to print, as on the command line
    /// (`record`, `report heatmap`) [default: udamon's own page]
    #[arg(value_name = "SUBCOMMAND")]
    pub command: Vec<String>,
    /// Write every page into DIR instead (udamon.1, udamon-record.1,
    /// udamon-report-heatmap.1, ...)
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write the record
    #[arg(short, long, default_value = "udamon-demo.udr")]
    pub output: PathBuf,
    /// Where to write the heatmap image (.png or .svg)
    #[arg(long, default_value = "heatmap.png")]
    pub image: PathBuf,
    /// Seed of the simulation
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Colour the terminal heatmap: auto (on a terminal, unless NO_COLOR is
    /// set), always or never
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// Monitoring attributes, as in kernel DAMON (defaults: the kernel's, but
/// the ops update interval is damo's 1 s).
#[derive(Args, Debug, Clone)]
pub struct AttrsArgs {
    /// Sampling interval: how often each region's sample page is checked
    #[arg(long, value_name = "DURATION", default_value = "5ms")]
    pub sample: String,
    /// Aggregation interval: the length of one snapshot's window
    #[arg(long, value_name = "DURATION", default_value = "100ms")]
    pub aggr: String,
    /// How often the monitored ranges are re-derived from the mappings
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub update: String,
    /// Lower bound of the region count
    #[arg(long, default_value_t = 10)]
    pub min_regions: u32,
    /// Upper bound of the region count (bounds the monitoring overhead)
    #[arg(long, default_value_t = 1000)]
    pub max_regions: u32,
    /// Auto-tune the intervals toward this share of observed accesses
    /// (basis points; 400 = 4%, the kernel's recommendation); off by default
    #[arg(long, value_name = "BP")]
    pub intervals_goal: Option<u32>,
    /// Region adaptation: kernel (DAMON's, faithful) or enhanced (regions
    /// fitted to resident memory, moving windows followed; udamon's engine
    /// only, not kernel DAMON: docs/enhanced.md)
    #[arg(long, value_name = "MODE", default_value = "kernel")]
    pub mode: udamon_core::Mode,
}

impl AttrsArgs {
    /// The attributes the flags give, validated.
    pub fn attrs(&self) -> Result<Attrs, UsageError> {
        let sample_us = duration_arg("sample", &self.sample)?;
        let mut attrs = Attrs {
            sample_us,
            aggr_us: duration_arg("aggr", &self.aggr)?,
            update_us: duration_arg("update", &self.update)?,
            min_nr_regions: self.min_regions,
            max_nr_regions: self.max_regions,
            intervals_goal: IntervalsGoal::default(),
            mode: self.mode,
        };
        if let Some(bp) = self.intervals_goal {
            attrs.intervals_goal = IntervalsGoal::recommended(bp, sample_us);
        }
        attrs.validate().map_err(|e| UsageError(e.to_string()))?;
        Ok(attrs)
    }
}

/// Live targets: running processes, a cgroup's, or a command udamon starts.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    /// Monitor this running process (instead of --sim); repeat it for
    /// several: each process is one target of the same monitor, which
    /// shares its region budget among them
    #[arg(long, value_name = "PID", conflicts_with_all = ["sim", "command"])]
    pub pid: Vec<u32>,
    /// With --pid: each process's descendants too, followed as they are
    /// forked and as they exit (`-- CMD` follows its tree by default)
    #[arg(long, conflicts_with_all = ["sim", "no_children"])]
    pub children: bool,
    /// With `-- CMD`: monitor the command's own process only, not the
    /// processes it starts
    #[arg(long, requires = "command")]
    pub no_children: bool,
    /// Monitor every process of this cgroup v2 and of the cgroups under
    /// it, followed as they come and go: /sys/fs/cgroup/PATH, or PATH
    /// under /sys/fs/cgroup
    #[arg(long, value_name = "PATH", conflicts_with_all = ["sim", "command"])]
    pub cgroup: Option<PathBuf>,
    /// Monitor the physical address space (System RAM; needs root)
    #[arg(long, conflicts_with_all = ["sim", "command", "pid", "cgroup", "children"])]
    pub paddr: bool,
    /// How to watch a live process: auto picks kdamond, else idle, else
    /// softdirty, and says which
    #[arg(long, value_enum, default_value_t = OpsChoice::Auto)]
    pub ops: OpsChoice,
    /// Start this command and monitor it and every process it starts
    /// (after `--`; --no-children: the command's process only), until the
    /// last of them exits; udamon ends the command when --duration passes
    /// first
    #[arg(last = true, value_name = "CMD", conflicts_with = "sim")]
    pub command: Vec<String>,
    /// End the run when the process execs another program (default: go on
    /// monitoring the new program from fresh regions; the record marks each
    /// exec). One process only: with `-- CMD`, the command's own process
    #[arg(long, conflicts_with_all = ["children", "cgroup"])]
    pub stop_on_exec: bool,
    /// When soft-dirty monitoring resets the bits: sample (before every
    /// sample, as the kernel clears accessed bits; each reset walks the
    /// whole process), window (once per aggregation window), windows:N
    /// (every Nth window), auto (window, or less often where that would
    /// cost over 10% of a CPU). With --sim: simulate soft-dirty monitoring
    /// reset so (docs/live.md)
    #[arg(long, value_name = "WHEN", default_value = "sample")]
    pub softdirty_reset: udamon_core::softdirty::SoftDirtyReset,
    /// Read /proc and /sys under this root instead of / (tests)
    #[arg(long, hide = true)]
    pub root: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Simulated workload spec (TOML, see docs/sim-spec.md)
    #[arg(long, value_name = "SPEC", required_unless_present_any = ["pid", "command", "paddr", "cgroup", "children"])]
    pub sim: Option<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Record file to write
    #[arg(short, long, default_value = "udamon.udr")]
    pub output: PathBuf,
    /// Seed of the simulation [default: the spec's `seed`, else 0]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration [default: the spec's `duration`]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub attrs: AttrsArgs,
    /// Baseline: N static equal regions, no adaptation
    #[arg(long, value_name = "N", conflicts_with = "full_scan")]
    pub fixed_regions: Option<u32>,
    /// Baseline: check every page at every sample (exact, slow)
    #[arg(long)]
    pub full_scan: bool,
    /// With `-- CMD`: sample the command's allocations (each process of
    /// its tree) with a library udamon preloads into it, into side files
    /// beside the record (OUTPUT.allocs.PID), so reports name heap memory
    /// by the allocation site that made it (docs/objects.md)
    #[arg(long, requires = "command")]
    pub alloc_sites: bool,
    /// With `-- CMD`: apply these placement hints (`udamon hints`) in the
    /// command as it runs, through the library udamon preloads into it:
    /// hinted globals and the allocations of hinted sites are locked in
    /// memory or placed on their node (docs/objects.md)
    #[arg(long, value_name = "HINTS.toml", requires = "command")]
    pub hints: Option<PathBuf>,
    /// With --alloc-sites: every allocation of at least SIZE is recorded
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "64K",
        requires = "alloc_sites"
    )]
    pub alloc_threshold: String,
    /// With --alloc-sites: smaller ones are sampled, one per SIZE bytes
    /// allocated on average (0 records them all)
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "512K",
        requires = "alloc_sites"
    )]
    pub alloc_sample: String,
    /// Print the run's summary as JSON
    #[arg(long)]
    pub json: bool,
}

impl RecordArgs {
    /// The allocation sampler's settings (`--alloc-sites`), its side files
    /// named after the record.
    pub fn alloc_sites(&self) -> Result<Option<udamon_session::AllocSites>, UsageError> {
        if !self.alloc_sites {
            return Ok(None);
        }
        let size = |flag: &str, v: &str| {
            parse_size(v, Fraction::Round).map_err(|e| UsageError(format!("--{flag}: {e}")))
        };
        let mut prefix = self.output.clone().into_os_string();
        prefix.push(".allocs");
        Ok(Some(udamon_session::AllocSites {
            prefix: prefix.into(),
            options: udamon_preload::Options {
                threshold: size("alloc-threshold", &self.alloc_threshold)?.max(1),
                sample_interval: size("alloc-sample", &self.alloc_sample)?,
                ..udamon_preload::Options::default()
            },
        }))
    }
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// Scheme file: one-line text, TOML or JSON (see docs/schemes.md)
    pub schemes: PathBuf,
    /// Simulated workload spec (TOML, see docs/sim-spec.md)
    #[arg(long, value_name = "SPEC", required_unless_present_any = ["pid", "command", "paddr", "cgroup", "children"])]
    pub sim: Option<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Also write a record of the run with schemes
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Seed of the simulation [default: the spec's `seed`, else 0]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration [default: the spec's `duration`]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub attrs: AttrsArgs,
    /// Turn every action into `stat`: report what would have been applied
    #[arg(long)]
    pub dry_run: bool,
    /// Print the comparison as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum SchemesCommand {
    /// Parse and validate a scheme file and print its normalised form
    Check {
        /// Scheme file: one-line text, TOML or JSON
        file: PathBuf,
        /// Print the normalised form as JSON instead of TOML
        #[arg(long, conflicts_with = "damo")]
        json: bool,
        /// Print the schemes in damo's JSON layout instead, the list `damo
        /// start --schemes FILE` reads (fails on what only udamon's engine
        /// does)
        #[arg(long)]
        damo: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Access frequency over time and address space
    Heatmap(HeatmapArgs),
    /// One self-contained HTML page: zoomable heatmap, working set, hot
    /// ranges, schemes
    Html(HtmlArgs),
    /// Working set size: distribution and time series
    Wss(WssArgs),
    /// The hottest regions, with their size and age
    Hot(HotArgs),
    /// What the memory holds, by name (data symbols, sections, files,
    /// anonymous mappings), and how hot each object was
    Objects(ObjectsArgs),
    /// Every snapshot as JSON lines, after a header line
    Raw(RawArgs),
    /// Accuracy against the exact truth (simulated records only)
    Accuracy(AccuracyArgs),
    /// Per-scheme statistics and effective quotas over time
    Stats(JsonFileArgs),
    /// The run's summary: memory, runtime, faults, schemes
    Summary(SummaryArgs),
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// Record file
    pub file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Add a table of the run's processes (targets): pid, comm, cgroup,
    /// arrival, exit, windows seen and median working set
    #[arg(long, value_enum, value_name = "WHAT")]
    pub by: Option<By>,
}

/// What a report breaks down by (`--by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum By {
    /// Each process (target) on its own: one row or table per target index
    Process,
}

#[derive(Args, Debug)]
pub struct JsonFileArgs {
    /// Record file
    pub file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// The part of a record a report reads (or `cut` keeps): the flags every
/// report shares, declared once. A command whose reading of a flag differs
/// (a default, a meaning) says so with its own help text below.
#[derive(Args, Debug, Clone, Default)]
pub struct SelectArgs {
    /// Only the snapshots whose windows overlap START-END, durations since
    /// the record's start (e.g. 60s-2m)
    #[arg(long, value_name = "START-END")]
    pub time_range: Option<String>,
    /// Only the regions' parts in START-END (hex addresses or sizes)
    #[arg(long, value_name = "START-END")]
    pub address_range: Option<String>,
    /// Only this target, by index (repeatable)
    #[arg(long, value_name = "N")]
    pub target: Vec<u32>,
    /// Only the targets of this process id (repeatable; a pid reused
    /// selects each process that had it)
    #[arg(long, value_name = "PID")]
    pub pid: Vec<u32>,
    /// Only the targets whose command name (/proc/PID/comm, at most 15
    /// bytes; a longer NAME matches by its first 15) is NAME (repeatable)
    #[arg(long, value_name = "NAME")]
    pub comm: Vec<String>,
}

impl SelectArgs {
    /// Whether it names targets (`--target`, `--pid` or `--comm`).
    pub fn names_targets(&self) -> bool {
        !(self.target.is_empty() && self.pid.is_empty() && self.comm.is_empty())
    }

    /// `--time-range START-END`: durations since the record's start, in
    /// microseconds.
    pub fn time_range(&self) -> Result<Option<(u64, u64)>, UsageError> {
        self.time_range
            .as_deref()
            .map(|s| range_arg("time-range", s, |t| parse_duration_us(t, Fraction::Round)))
            .transpose()
    }

    /// `--address-range START-END`: hex addresses or sizes.
    pub fn address_range(&self) -> Result<Option<(u64, u64)>, UsageError> {
        self.address_range
            .as_deref()
            .map(|s| range_arg("address-range", s, parse_address))
            .transpose()
    }
}

const RAW_TIME_RANGE: &str =
    "Only the snapshots whose windows overlap START-END, durations since the \
    record's start (e.g. 60s-2m), and the entries recorded meanwhile";
const HEATMAP_TIME_RANGE: &str =
    "Time range to show, START-END in durations since the record's start";
const HEATMAP_ADDRESS_RANGE: &str =
    "Address range to show, START-END (hex or sizes) [default: the active range]";
const HEATMAP_TARGET: &str =
    "Target to draw, by index (repeatable: the first of them in the time range is \
    drawn) [default: the first target of the first snapshot in the time range]";
const HTML_ADDRESS_RANGE: &str =
    "Address range to show, START-END (hex or sizes) [default: the heatmap's \
    active range; all addresses for the working set and hot table]";
const HTML_TARGET: &str =
    "Target of the heatmap, and the only one the working set and hot table count \
    [default: the heatmap draws the first target of the first snapshot in the \
    time range; the others cover all targets]";
const WSS_ADDRESS_RANGE: &str = "Only the working set in START-END (hex addresses or sizes)";
const WSS_TARGET: &str = "Target to measure, by index (repeatable) [default: all targets, summed]";
const HOT_TIME_RANGE: &str =
    "Only the snapshots whose windows overlap START-END, durations since the \
    record's start: the range --aggregate averages over, or the one whose last \
    snapshot is shown [default: the whole record]";
const HOT_TARGET: &str = "Target to list, by index (repeatable) [default: all targets]";
const CUT_TIME_RANGE: &str =
    "Keep the snapshots whose windows overlap START-END, times since the record's \
    start (e.g. 60s-2m)";
const CUT_ADDRESS_RANGE: &str =
    "Keep the regions' parts in START-END (hex addresses or sizes, e.g. \
    0x7f0000000000-0x7f0040000000)";
const CUT_TARGET: &str = "Keep only this target, by index (repeatable)";

#[derive(Args, Debug)]
#[command(mut_arg("time_range", |a| a.help(RAW_TIME_RANGE)))]
pub struct RawArgs {
    /// Record file
    pub file: PathBuf,
    /// Accepted as by every report; the output is JSON lines either way
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Args, Debug)]
#[command(mut_arg("time_range", |a| a.help(HEATMAP_TIME_RANGE)))]
#[command(mut_arg("address_range", |a| a.help(HEATMAP_ADDRESS_RANGE)))]
#[command(mut_arg("target", |a| a.help(HEATMAP_TARGET)))]
pub struct HeatmapArgs {
    /// Record file
    pub file: PathBuf,
    /// Print the heatmap model as JSON
    #[arg(long)]
    pub json: bool,
    /// Write an image instead of printing (.png or .svg)
    #[arg(short, long, value_name = "IMAGE")]
    pub output: Option<PathBuf>,
    /// Show every monitored range, not just where accesses were seen
    #[arg(long)]
    pub all: bool,
    /// Resolution, TIMExADDR bins [default: 40x68 for text, 500x500 for
    /// images and JSON]
    #[arg(long, value_name = "TxA")]
    pub resol: Option<String>,
    /// Image width in pixels (with --output)
    #[arg(long, value_name = "PX", default_value_t = ImageOptions::default().width,
          value_parser = pixels(&WIDTH_RANGE), requires = "output")]
    pub width: u32,
    /// Image height in pixels (with --output)
    #[arg(long, value_name = "PX", default_value_t = ImageOptions::default().height,
          value_parser = pixels(&HEIGHT_RANGE), requires = "output")]
    pub height: u32,
    /// Image title (with --output) [default: the workload and how it was
    /// monitored]
    #[arg(long, requires = "output")]
    pub title: Option<String>,
    /// Colour the terminal heatmap: auto (on a terminal, unless NO_COLOR is
    /// set), always or never
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Args, Debug)]
#[command(mut_arg("time_range", |a| a.help(HEATMAP_TIME_RANGE)))]
#[command(mut_arg("address_range", |a| a.help(HTML_ADDRESS_RANGE)))]
#[command(mut_arg("target", |a| a.help(HTML_TARGET)))]
pub struct HtmlArgs {
    /// Record file
    pub file: PathBuf,
    /// The page to write (.html)
    #[arg(short, long, value_name = "FILE.html")]
    pub output: PathBuf,
    /// Print a JSON summary (output, html_bytes, snapshots, bins) instead
    /// of the "wrote" line
    #[arg(long)]
    pub json: bool,
    /// Page title [default: the workload and how it was monitored]
    #[arg(long)]
    pub title: Option<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub names: NameArgs,
}

impl HeatmapArgs {
    /// `--resol TIMExADDR`: the time and address bins, when given.
    pub fn bins(&self) -> Result<(Option<usize>, Option<usize>), UsageError> {
        let Some(s) = &self.resol else {
            return Ok((None, None));
        };
        let bad = || UsageError(format!("--resol {s}: expected TIMExADDR bins, like 40x80"));
        let (t, a) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        Ok((
            Some(t.trim().parse().map_err(|_| bad())?),
            Some(a.trim().parse().map_err(|_| bad())?),
        ))
    }

    /// What to write: the image `--output` names (by its extension), else
    /// JSON with `--json`, else text.
    pub fn format(&self) -> Result<HeatmapFormat, UsageError> {
        Ok(match &self.output {
            Some(p) => match p.extension().and_then(|e| e.to_str()) {
                Some("png") => HeatmapFormat::Png,
                Some("svg") => HeatmapFormat::Svg,
                _ => {
                    return Err(UsageError(format!(
                        "{}: the image name must end in .png or .svg",
                        p.display()
                    )))
                }
            },
            None if self.json => HeatmapFormat::Json,
            None => HeatmapFormat::Text,
        })
    }
}

/// A value parser for an image dimension in `range` pixels.
fn pixels(range: &RangeInclusive<u32>) -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(i64::from(*range.start())..=i64::from(*range.end()))
}

#[derive(Args, Debug)]
#[command(mut_arg("address_range", |a| a.help(WSS_ADDRESS_RANGE)))]
#[command(mut_arg("target", |a| a.help(WSS_TARGET)))]
pub struct WssArgs {
    /// Record file
    pub file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Percentiles to report
    #[arg(long, value_delimiter = ',', default_value = "0,25,50,75,100")]
    pub percentiles: Vec<u32>,
    /// Least nr_accesses for a region to count as working set
    #[arg(long, default_value_t = 1)]
    pub acc_thres: u32,
    /// Least region size to count as working set (bytes, or with K, M, G, T)
    #[arg(long, value_name = "SIZE", default_value = "1")]
    pub sz_thres: String,
    /// Snapshots skipped at the start
    #[arg(long, default_value_t = 0)]
    pub skip: usize,
    /// Also print the time series
    #[arg(long)]
    pub series: bool,
    /// Break the working set down by process: one row per target, with its
    /// pid, comm, arrival and exit [default: all targets summed]
    #[arg(long, value_enum, value_name = "WHAT")]
    pub by: Option<By>,
    #[command(flatten)]
    pub select: SelectArgs,
}

impl WssArgs {
    /// The report's options, for `target` (checked against the record).
    pub fn options(&self, target: Option<u32>) -> Result<WssOptions, UsageError> {
        Ok(WssOptions {
            percentiles: self.percentiles.iter().map(|&p| f64::from(p)).collect(),
            acc_thres: self.acc_thres,
            sz_thres: parse_size(&self.sz_thres, Fraction::Round)
                .map_err(|m| UsageError(format!("--sz-thres: {m}")))?,
            skip: self.skip,
            target,
        })
    }
}

#[derive(Args, Debug)]
#[command(mut_arg("time_range", |a| a.help(HOT_TIME_RANGE)))]
#[command(mut_arg("target", |a| a.help(HOT_TARGET)))]
pub struct HotArgs {
    /// Record file
    pub file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// How many regions to list, hottest first; 0 lists all
    #[arg(short = 'n', long, default_value_t = HotOptions::default().top)]
    pub top: usize,
    /// Use the snapshot covering this time since the record's start [default: the last]
    #[arg(long, value_name = "DURATION", conflicts_with = "aggregate")]
    pub at: Option<String>,
    /// Rank address ranges by their average frequency over the record (or
    /// over --time-range)
    #[arg(long)]
    pub aggregate: bool,
    /// List the hottest regions of each process (target) apart, --top of
    /// each; without --at or --aggregate, each as it was last seen
    #[arg(long, value_enum, value_name = "WHAT")]
    pub by: Option<By>,
    #[command(flatten)]
    pub names: NameArgs,
    #[command(flatten)]
    pub select: SelectArgs,
}

impl HotArgs {
    /// The report's options, for `target` (checked against the record).
    pub fn options(&self, target: Option<u32>) -> Result<HotOptions, UsageError> {
        Ok(HotOptions {
            at_us: self
                .at
                .as_deref()
                .map(|s| duration_arg("at", s))
                .transpose()?,
            aggregate: self.aggregate,
            // Without --aggregate the selection's last snapshot is shown.
            time_range: self.select.time_range()?.filter(|_| self.aggregate),
            top: self.top,
            target,
        })
    }
}

#[derive(Args, Debug)]
pub struct HintsArgs {
    /// Record file
    pub file: PathBuf,
    /// The hints file to write (TOML)
    #[arg(short, long, value_name = "FILE.toml")]
    pub output: PathBuf,
    /// Hint at most this many bytes in all (the objects' mean sizes),
    /// hottest objects first [default: no limit]
    #[arg(long, value_name = "SIZE")]
    pub max_bytes: Option<String>,
    /// Only objects at least this hot (access frequency, e.g. 5%)
    #[arg(long, value_name = "PERCENT", default_value = "5%")]
    pub min_frequency: String,
    /// Place the objects on NUMA node N (mbind) instead of locking them
    #[arg(long, value_name = "N")]
    pub node: Option<u32>,
    /// Write mlock schemes over the objects' recorded addresses instead
    /// (for `udamon apply --sim`: a simulated workload's objects stay put)
    #[arg(long)]
    pub schemes: bool,
    /// Print a JSON summary instead of the "wrote" line
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub names: NameArgs,
    #[command(flatten)]
    pub select: SelectArgs,
}

impl HintsArgs {
    /// How the hints are chosen.
    pub fn options(&self) -> Result<udamon_objects::HintsOptions, UsageError> {
        let max_bytes = self
            .max_bytes
            .as_deref()
            .map(|v| {
                parse_size(v, Fraction::Round).map_err(|e| UsageError(format!("--max-bytes: {e}")))
            })
            .transpose()?;
        let f = &self.min_frequency;
        let bad = || {
            UsageError(format!(
                "--min-frequency {f}: expected a percentage from 0% to 100%, like 5%"
            ))
        };
        let min_frequency = match f.trim().strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
            None => f.trim().parse::<f64>(),
        }
        .ok()
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(bad)?;
        Ok(udamon_objects::HintsOptions {
            max_bytes,
            min_frequency,
            action: if self.node.is_some() {
                udamon_objects::HintAction::Node
            } else {
                udamon_objects::HintAction::Mlock
            },
            node: self.node,
        })
    }
}

#[derive(Args, Debug)]
pub struct ObjectsArgs {
    /// Record file
    pub file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// How many objects to list, by share of accesses; 0 lists all
    #[arg(short = 'n', long, default_value_t = 20)]
    pub top: usize,
    /// One row per object and process, rather than each object summed
    /// over the processes that map it
    #[arg(long, value_enum, value_name = "WHAT")]
    pub by: Option<By>,
    #[command(flatten)]
    pub names: NameArgs,
    #[command(flatten)]
    pub select: SelectArgs,
}

impl NameArgs {
    /// The namer's options.
    pub fn options(&self) -> udamon_objects::NamerOptions {
        udamon_objects::NamerOptions {
            root: self.root.clone(),
            debug_root: Some(self.debug_dir.clone()),
            symbols: !self.no_symbols,
        }
    }
}

/// Where the files a record names are read from.
#[derive(Args, Debug, Clone)]
pub struct NameArgs {
    /// Read the files the record's mappings name under this directory
    /// (a copy of the recorded machine's or container's root)
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Separate debug files, found by build-id under DIR/.build-id/
    #[arg(long, value_name = "DIR", default_value = "/usr/lib/debug")]
    pub debug_dir: PathBuf,
    /// Name mapped files and their sections, not their data symbols
    #[arg(long)]
    pub no_symbols: bool,
}

#[derive(Args, Debug)]
pub struct AccuracyArgs {
    /// Record file
    pub file: PathBuf,
    /// Print the scores as JSON
    #[arg(long)]
    pub json: bool,
    /// Aggregation windows skipped at the start while regions form
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Access frequency (0-1) at or above which memory counts as hot
    #[arg(long, default_value_t = 0.2)]
    pub hot_threshold: f64,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// damo record file (`damo record --output_type json|json_compressed|perf_script`)
    pub file: PathBuf,
    /// udamon record to write
    #[arg(short, long, default_value = "damo-import.udr")]
    pub output: PathBuf,
    /// Print what was imported as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
#[command(mut_arg("time_range", |a| a.help(CUT_TIME_RANGE)))]
#[command(mut_arg("address_range", |a| a.help(CUT_ADDRESS_RANGE)))]
#[command(mut_arg("target", |a| a.help(CUT_TARGET)))]
pub struct CutArgs {
    /// Record to cut from
    pub record: PathBuf,
    /// Record to write
    #[arg(short, long, default_value = "cut.udr")]
    pub output: PathBuf,
    /// Print what was kept as JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// udamon record to convert
    pub record: PathBuf,
    /// damo record to write (damo's own default name is damon.data)
    #[arg(short, long, default_value = "damon.data")]
    pub output: PathBuf,
    /// damo's format: its default json_compressed, json, or perf-script text
    #[arg(long, value_enum, default_value_t = ExportFormatArg::DamoJsonCompressed)]
    pub format: ExportFormatArg,
    /// Print what was written as JSON
    #[arg(long)]
    pub json: bool,
}

/// The damo formats `udamon export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormatArg {
    DamoJsonCompressed,
    DamoJson,
    PerfScript,
}

#[derive(Args, Debug)]
pub struct FeaturesArgs {
    /// Print what was found as JSON
    #[arg(long)]
    pub json: bool,
    /// Probe a fake tree under this root instead of the machine (tests)
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
}

#[derive(Args, Debug)]
pub struct DamonStatArgs {
    /// Print the module's parameters as JSON
    #[arg(long)]
    pub json: bool,
    /// Read a fake tree under this root instead of the machine (tests)
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
}

#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// Print what was done as JSON
    #[arg(long)]
    pub json: bool,
    /// Work on a fake tree under this root instead of the machine (tests)
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
}

#[derive(Args, Debug)]
pub struct TopologyArgs {
    /// Print the topology as JSON
    #[arg(long)]
    pub json: bool,
    /// Write the self-tuned tiering schemes for this machine's node pairs
    /// to FILE (TOML), for `udamon apply FILE --paddr --ops kdamond`
    #[arg(long, value_name = "FILE")]
    pub tiering_schemes: Option<PathBuf>,
    /// With --tiering-schemes: schemes for processes' memory (our engine,
    /// move_pages) instead of physical memory: no address or young-page
    /// filters
    #[arg(long, requires = "tiering_schemes")]
    pub processes: bool,
    /// With --tiering-schemes: the interleaving variant, whose promotion
    /// spreads hot memory over the upper and the lower node with these
    /// weights (kernel DAMON's dests, Linux 6.17+) instead of moving it
    /// all to the upper node: W_UPPER:W_LOWER (3:1), or `bandwidth` for
    /// the nodes' HMAT read bandwidths (docs/tiering.md)
    #[arg(
        long,
        value_name = "W_UPPER:W_LOWER|bandwidth",
        requires = "tiering_schemes"
    )]
    pub interleave: Option<udamon_session::topology::Interleave>,
    /// The simulated machine of this workload spec (its [[machine.node]]
    /// entries: node 0 over every other node) instead of this one; its
    /// schemes are for `udamon apply FILE --sim SPEC`
    #[arg(long, value_name = "SPEC")]
    pub sim: Option<PathBuf>,
    /// Work on a fake tree under this root instead of the machine (tests)
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The config file (TOML, or JSON when it ends in .json); see
    /// docs/service.md
    #[arg(value_name = "CONFIG")]
    pub config: PathBuf,
    /// Validate the config and print the plan (each job's path on this
    /// machine and why), trying the endpoint's address, the socket's path
    /// and the record directories and changing nothing; exit 2 for a bad
    /// config, 3 when a job needs what this machine lacks, 1 when the
    /// endpoint, socket or a record directory cannot be set up
    #[arg(long)]
    pub check: bool,
    /// With --check: print the plan as JSON
    #[arg(long, requires = "check")]
    pub json: bool,
    /// How much to log to stderr: error, warn, info or debug
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,
    /// Work on a fake tree under this root instead of the machine (tests)
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
    /// As root, accept a config, scheme file or spec that is owned by
    /// another user or writable by group or others (refused by default,
    /// as sshd's StrictModes refuses such files)
    #[arg(long)]
    pub allow_insecure_files: bool,
}

#[derive(Args, Debug)]
pub struct CtlArgs {
    /// What to ask
    #[command(subcommand)]
    pub request: CtlRequest,
    /// The service's control socket (its config's `socket`)
    #[arg(long, global = true, value_name = "PATH", default_value = udamon_service::config::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print the answer as JSON
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug, Clone)]
pub enum CtlRequest {
    /// Each job's state, path, targets, regions, intervals, schemes with
    /// their quotas and goals, and guardrails
    Status,
    /// Re-read the config file and apply the difference (as SIGHUP does)
    Reload,
    /// Pause a job, keeping what it learned: on kernel DAMON of Linux 7.2+
    /// the context is paused (the kdamond, its regions and their ages
    /// stay; nothing is sampled or applied); on older kernels only its
    /// actions stop (monitoring goes on); udamon's engine stops stepping
    Pause {
        /// The job's name, as in the config
        job: String,
    },
    /// Resume a paused job where it was
    Resume {
        /// The job's name, as in the config
        job: String,
    },
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Shorter runs (for a quick look; figures are noisier)
    #[arg(long)]
    pub quick: bool,
    /// Print the figures as JSON
    #[arg(long)]
    pub json: bool,
    /// Run only these parts (cost, record, heatmap, accuracy, schemes, tune;
    /// service, the service's 24-hour soak, endpoint, the metrics endpoint
    /// under 1,000 idle connections and out of descriptors, tiering, the
    /// tiering policies
    /// on two-node simulated machines, import, an hour of damo's records
    /// imported and drawn, softdirty, the accuracy of soft-dirty's reset
    /// policies, lock, hot objects locked under a memory limit,
    /// allocs, allocation sampling's cost against heaptrack, and
    /// damon-stat, one metrics scrape's DAMON_STAT part on a fake tree, run
    /// only when named)
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

/// How runs are scored (the DAOS paper's Listing 2 by default).
#[derive(Args, Debug, Clone)]
pub struct ScoreArgs {
    /// Weights of the default score: WEIGHT x relative gain of the
    /// performance and of the memory metric
    #[arg(long, value_name = "perf=W,mem=W", default_value = "perf=0.5,mem=0.5")]
    pub weights: String,
    /// Largest slowdown of the performance metric; a run at or above it
    /// scores the worst score seen so far (Listing 2), `none` to disable
    /// [default: 10%, none with --score-expr or --score-cmd]
    #[arg(long, value_name = "PERCENT")]
    pub sla: Option<String>,
    /// Performance metric of the default score and the SLA (runtime,
    /// faults, refaults, stall, psi_some, ...)
    #[arg(long, value_name = "METRIC", default_value = "runtime")]
    pub perf_metric: String,
    /// Memory metric of the default score (rss_avg, rss_peak, ...)
    #[arg(long, value_name = "METRIC", default_value = "rss_avg")]
    pub mem_metric: String,
    /// Score expression over the metrics instead of the default formula,
    /// e.g. "0.7 * (1 - runtime / base_runtime) + 0.3 * (1 - rss_avg /
    /// base_rss_avg)"; variables: runtime, rss_avg, rss_peak, faults,
    /// refaults, stall, psi_some, swapped, huge, reclaimed, action, each also
    /// as base_* for the scheme-less run, and knob
    #[arg(long, value_name = "EXPR", conflicts_with = "score_cmd")]
    pub score_expr: Option<String>,
    /// Command that prints the score (run by sh; metrics in UDAMON_RUNTIME_S,
    /// UDAMON_RSS_AVG_BYTES, ..., UDAMON_BASE_*, UDAMON_KNOB)
    #[arg(long, value_name = "CMD")]
    pub score_cmd: Option<String>,
}

impl ScoreArgs {
    /// The score options the flags give (built by udamon-tune).
    pub fn options(&self) -> udamon_tune::ScoreOptions {
        udamon_tune::ScoreOptions {
            weights: self.weights.clone(),
            sla: self.sla.clone(),
            perf_metric: self.perf_metric.clone(),
            mem_metric: self.mem_metric.clone(),
            expr: self.score_expr.clone(),
            cmd: self.score_cmd.clone(),
        }
    }
}

/// Tune one number of a scheme for a workload (DAOS auto-tuning).
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Scheme file to tune: one-line text, TOML or JSON (see docs/schemes.md)
    pub schemes: PathBuf,
    /// Simulated workload to tune on (TOML spec, see docs/sim-spec.md)
    #[arg(long, value_name = "SPEC", required_unless_present = "replay")]
    pub sim: Option<PathBuf>,
    /// Tune on a replay of this record: every --step value is predicted, the
    /// best is confirmed by one real run (on --sim, or the record's own
    /// spec for simulator records)
    #[arg(long, value_name = "RECORD")]
    pub replay: Option<PathBuf>,
    /// The number to tune, [INDEX.]FIELD: min_sz, max_sz, min_freq,
    /// max_freq, min_age, max_age, quota.ms, quota.sz or
    /// quota.reset_interval of scheme INDEX (default 0), e.g. 1.quota.sz
    #[arg(long, default_value = "min_age")]
    pub knob: String,
    /// Values to try, START..END in the knob's unit (0s..60s, 0..1G, 0%..5%)
    /// [default: 0s..60s for ages]
    #[arg(long, value_name = "START..END")]
    pub range: Option<String>,
    /// Grid of the values tried, in the knob's unit [default: 1/60 of the range]
    #[arg(long, value_name = "STEP")]
    pub step: Option<String>,
    /// Runs with schemes to estimate the curve from [default: 10]
    #[arg(long, value_name = "N", conflicts_with_all = ["time_limit", "unit_time"])]
    pub samples: Option<usize>,
    /// Time budget of the tuning: samples = TIME_LIMIT / UNIT_TIME
    #[arg(long, value_name = "DURATION", requires = "unit_time")]
    pub time_limit: Option<String>,
    /// What one run of the workload takes (with --time-limit)
    #[arg(long, value_name = "DURATION", requires = "time_limit")]
    pub unit_time: Option<String>,
    /// Seed of the sampling and of the simulated workload [default: the
    /// spec's (or the record's) seed, else 0]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration of the real runs [default: the spec's]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub attrs: AttrsArgs,
    #[command(flatten)]
    pub score: ScoreArgs,
    /// Apply the fitted curve's peak even when its confirming run scores
    /// below the best sample (the paper's behaviour)
    #[arg(long)]
    pub trust_fit: bool,
    /// Runs at once in a replay sweep [default: the number of CPUs]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Print the samples, the fit and the choice as JSON
    #[arg(long)]
    pub json: bool,
    /// Write the tuned schemes here (TOML, for `udamon apply`)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw the samples, the fitted curve and the choice (.png or .svg)
    #[arg(long, value_name = "IMAGE")]
    pub plot: Option<PathBuf>,
}

impl TuneArgs {
    /// How many sampled runs the flags allow.
    pub fn budget(&self) -> udamon_tune::plan::Budget {
        match (&self.time_limit, &self.unit_time) {
            (Some(limit), Some(unit)) => udamon_tune::plan::Budget::Time {
                limit: limit.clone(),
                unit: unit.clone(),
            },
            _ => udamon_tune::plan::Budget::Samples(self.samples.unwrap_or(10)),
        }
    }
}

/// Predict what schemes would do to a recorded workload.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Record file to replay (see `udamon record`)
    pub record: PathBuf,
    /// Scheme file to try: one-line text, TOML or JSON (see docs/schemes.md)
    #[arg(long, value_name = "FILE", required = true)]
    pub schemes: PathBuf,
    /// Also run the real workload (the record's own spec for simulator
    /// records, or --sim) and show how far the prediction is
    #[arg(long)]
    pub check: bool,
    /// The real workload for --check (TOML spec)
    #[arg(long, value_name = "SPEC", requires = "check")]
    pub sim: Option<PathBuf>,
    /// Seed of the replay (and of --check's run) [default: the record's]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration of --check's real runs [default: the spec's]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub attrs: AttrsArgs,
    #[command(flatten)]
    pub score: ScoreArgs,
    /// Print the prediction as JSON
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod doc_tests;
