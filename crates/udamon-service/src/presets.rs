//! Built-in scheme sets, named in a job's `schemes = [{ preset = "..." }]`.
//! Each follows the kernel module or paper it is named after; the numbers
//! are theirs (see docs/service.md).

use udamon_core::schemes::Damos;

/// The preset names, for errors and `--check` (`tiering` is made from the
/// machine's topology: `udamon_session::topology::tiering_schemes`).
pub const NAMES: [&str; 4] = ["reclaim", "ethp", "lru_sort", "tiering"];

/// DAMON_RECLAIM's defaults: page out memory not accessed for 2 minutes,
/// at most 10 ms of work and 128 MiB per second, oldest first, only while
/// free memory is between 20% and 50% (watermarks checked every 5 s).
const RECLAIM: &str = r#"
[[scheme]]
action = "pageout"
access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["2m", "max"] }
[scheme.quota]
time = "10ms"
size = "128M"
reset_interval = "1s"
weights = { sz = 0, nr_accesses = 0, age = 1 }
[scheme.watermarks]
metric = "free_mem_rate"
interval = "5s"
high = 500
mid = 400
low = 200
"#;

/// The DAOS paper's ethp (listing 3): huge pages where memory is accessed
/// at least 5% of the time, none in 2 MiB+ regions idle for 7 s.
const ETHP: &str = "min max 5 max min max hugepage\n2M max min min 7s max nohugepage\n";

/// DAMON_LRU_SORT's defaults: hot memory (accessed at least half the
/// time) to the head of the LRU lists, memory idle for 2 minutes to the
/// tail; 10 ms of work per second split between the two; only while free
/// memory is between 5% and 20%.
const LRU_SORT: &str = r#"
[[scheme]]
action = "lru_prio"
access_pattern = { sz = ["4K", "max"], freq = ["50%", "max"], age = ["min", "max"] }
[scheme.quota]
time = "5ms"
reset_interval = "1s"
weights = { sz = 0, nr_accesses = 1, age = 1 }
[scheme.watermarks]
metric = "free_mem_rate"
interval = "5s"
high = 200
mid = 150
low = 50

[[scheme]]
action = "lru_deprio"
access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["2m", "max"] }
[scheme.quota]
time = "5ms"
reset_interval = "1s"
weights = { sz = 0, nr_accesses = 1, age = 1 }
[scheme.watermarks]
metric = "free_mem_rate"
interval = "5s"
high = 200
mid = 150
low = 50
"#;

/// The schemes of preset `name`.
pub fn get(name: &str) -> Result<Vec<Damos>, String> {
    let text = match name {
        "reclaim" => RECLAIM,
        "ethp" => ETHP,
        "lru_sort" => LRU_SORT,
        _ => {
            return Err(format!(
                "no preset \"{name}\" (presets: {})",
                NAMES.join(", ")
            ))
        }
    };
    // The presets are ours and tested: a failure here is a bug.
    udamon_scheme_file::parse(text, &format!("preset {name}"), None)
        .map_err(|e| format!("preset {name} does not parse: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_core::schemes::Action;

    #[test]
    fn every_preset_parses_with_its_numbers() {
        // (tiering is made from a topology: config.rs tests it.)
        for n in NAMES.iter().filter(|n| **n != "tiering") {
            assert!(!get(n).unwrap().is_empty(), "{n}");
        }
        let r = &get("reclaim").unwrap()[0];
        assert_eq!(r.action, Action::Pageout);
        assert_eq!(r.pattern.min_age_us, 120_000_000);
        assert_eq!(r.quota.sz, 128 << 20);
        assert_eq!(r.quota.ms, 10);
        assert_eq!(
            (r.watermarks.high, r.watermarks.mid, r.watermarks.low),
            (500, 400, 200)
        );
        let l = get("lru_sort").unwrap();
        assert_eq!(
            (l[0].action, l[1].action),
            (Action::LruPrio, Action::LruDeprio)
        );
        assert_eq!(l[0].pattern.min_freq_bp, 5000);
    }
}
