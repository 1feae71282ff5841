//! A [`LokiProblem`] checked and indexed for the MILPs and the greedy: variants (one per
//! option group) with their latency-feasible batches, pools, root-to-leaf task paths, and the
//! candidate pruning of step 2.

use std::collections::{BTreeMap, HashSet};

use super::{LokiError, LokiProblem, LokiSettings};

/// A batch size a variant may be configured with.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    pub batch: usize,
    /// The node's option reported for this batch.
    pub option: usize,
    /// Profiled p99 of a batch of `batch`, ms (`l = b / q(b)`).
    pub latency_ms: f64,
    /// `q(b)`, queries/s of one instance.
    pub qps: f64,
}

/// One (model, hardware) of a task: the node's options of one group.
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub task: usize,
    pub group: u32,
    pub accuracy: f64,
    /// Index into [`Prepared::pools`].
    pub pool: usize,
    pub factor: f64,
    /// Latency-feasible batches, ascending; not empty.
    pub batches: Vec<Batch>,
}

impl Variant {
    /// Best throughput of one instance over its batches.
    pub fn peak_qps(&self) -> f64 {
        self.batches.iter().map(|b| b.qps).fold(0.0, f64::max)
    }
}

/// A root-to-leaf path of tasks.
#[derive(Debug, Clone)]
pub(crate) struct TaskPath {
    /// Tasks from the root; a task's position is its depth.
    pub tasks: Vec<usize>,
    /// Share of the objective: the leaf's reach over the sum of all leaves' reaches.
    pub weight: f64,
    /// Processing latency allowed along the path: `SLO / 2 - comm * tasks`, ms.
    pub budget_ms: f64,
    /// Product of the branch probabilities from the root to each position (inclusive).
    pub reach: Vec<f64>,
    /// Best `Â` reachable on the path (normalises the objective).
    pub top: f64,
}

/// The indexed problem.
#[derive(Debug)]
pub(crate) struct Prepared<'a> {
    pub problem: &'a LokiProblem,
    /// (name, workers), with workers > 0.
    pub pools: Vec<(String, usize)>,
    pub variants: Vec<Variant>,
    /// Usable variants per task (indices into `variants`).
    pub by_task: Vec<Vec<usize>>,
    pub children: Vec<Vec<usize>>,
    pub paths: Vec<TaskPath>,
    /// Per task, the first task path through it.
    pub first_path: Vec<usize>,
    /// Per task, its depth (position on every task path through it).
    pub depth: Vec<usize>,
}

impl<'a> Prepared<'a> {
    pub fn new(problem: &'a LokiProblem) -> Result<Prepared<'a>, LokiError> {
        validate(problem)?;
        let n = problem.nodes.len();
        let mut children = vec![Vec::new(); n];
        let mut depth = vec![0usize; n];
        for (i, node) in problem.nodes.iter().enumerate().skip(1) {
            let p = node.parents[0];
            children[p].push(i);
            depth[i] = depth[p] + 1;
        }
        let pools: Vec<(String, usize)> = problem
            .workers
            .iter()
            .filter(|(_, &w)| w > 0)
            .map(|(k, &w)| (k.clone(), w))
            .collect();

        // Task paths: one per leaf.
        let total_reach: f64;
        let mut paths = Vec::new();
        {
            let mut reach_of = vec![0.0f64; n];
            for (i, node) in problem.nodes.iter().enumerate() {
                let up = if i == 0 {
                    1.0
                } else {
                    reach_of[node.parents[0]]
                };
                reach_of[i] = up * node.branch_probability;
            }
            for leaf in (0..n).filter(|&i| children[i].is_empty()) {
                let mut tasks = vec![leaf];
                while let Some(&t) = tasks.last() {
                    match problem.nodes[t].parents.first() {
                        Some(&p) => tasks.push(p),
                        None => break,
                    }
                }
                tasks.reverse();
                let reach = tasks.iter().map(|&t| reach_of[t]).collect();
                let budget_ms = problem.slo_ms / 2.0 - problem.comm_latency_ms * tasks.len() as f64;
                paths.push(TaskPath {
                    tasks,
                    weight: reach_of[leaf],
                    budget_ms,
                    reach,
                    top: 0.0,
                });
            }
            total_reach = paths.iter().map(|p| p.weight).sum();
        }
        for p in &mut paths {
            p.weight = if total_reach > 0.0 {
                p.weight / total_reach
            } else {
                1.0 / n as f64
            };
        }
        let mut first_path = vec![usize::MAX; n];
        for (k, p) in paths.iter().enumerate() {
            for &t in &p.tasks {
                if first_path[t] == usize::MAX {
                    first_path[t] = k;
                }
            }
        }

        // Variants with every profiled batch, then the latency-feasible ones.
        let mut all: Vec<Variant> = Vec::new();
        for (i, node) in problem.nodes.iter().enumerate() {
            let mut groups: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for (k, o) in node.options.iter().enumerate() {
                groups.entry(o.group).or_default().push(k);
            }
            for (group, members) in groups {
                let Some(&rep) = members
                    .iter()
                    .max_by_key(|&&k| (node.options[k].variant.max_batch, usize::MAX - k))
                else {
                    continue;
                };
                let v = &node.options[rep].variant;
                let pool_name = problem.pool_of(i, rep).unwrap_or_default();
                let Some(pool) = pools.iter().position(|(name, _)| *name == pool_name) else {
                    continue;
                };
                let batches = v
                    .latency
                    .iter()
                    .filter(|p| p.batch >= 1 && p.batch <= v.max_batch)
                    .map(|p| Batch {
                        batch: p.batch,
                        option: members
                            .iter()
                            .copied()
                            .find(|&k| node.options[k].variant.max_batch == p.batch)
                            .unwrap_or(rep),
                        latency_ms: p.p99_ms,
                        qps: p.batch as f64 / p.p99_ms * 1000.0,
                    })
                    .collect();
                all.push(Variant {
                    task: i,
                    group,
                    accuracy: v.accuracy,
                    pool,
                    factor: problem.factor(i, group),
                    batches,
                });
            }
        }
        let mut fastest = vec![f64::INFINITY; n];
        for v in &all {
            if let Some(b) = v.batches.first() {
                fastest[v.task] = fastest[v.task].min(b.latency_ms);
            }
        }
        // Latest a task's batch may take: every other task of some path at its fastest.
        let mut bound = vec![f64::INFINITY; n];
        for p in &paths {
            let sum: f64 = p.tasks.iter().map(|&t| fastest[t]).sum();
            for &t in &p.tasks {
                bound[t] = bound[t].min(p.budget_ms - (sum - fastest[t]));
            }
        }
        let mut variants = Vec::new();
        let mut by_task = vec![Vec::new(); n];
        for mut v in all {
            v.batches.retain(|b| b.latency_ms <= bound[v.task] + 1e-9);
            // A batch no faster and no higher in throughput than another is never needed.
            let all = v.batches.clone();
            v.batches.retain(|b| {
                !all.iter().any(|o| {
                    o.batch != b.batch
                        && o.latency_ms <= b.latency_ms
                        && o.qps >= b.qps
                        && (o.latency_ms < b.latency_ms || o.qps > b.qps || o.batch < b.batch)
                })
            });
            if !v.batches.is_empty() {
                by_task[v.task].push(variants.len());
                variants.push(v);
            }
        }
        if let Some(i) = (0..n).find(|&i| by_task[i].is_empty()) {
            return Err(LokiError::Invalid(format!(
                "node '{}' has no option that runs on the cluster's pools within the SLO's processing budget ({:.1} ms on its paths)",
                problem.nodes[i].name,
                bound[i].max(0.0)
            )));
        }
        let mut prep = Prepared {
            problem,
            pools,
            variants,
            by_task,
            children,
            paths,
            first_path,
            depth,
        };
        for k in 0..prep.paths.len() {
            let best: Vec<usize> = prep.paths[k]
                .tasks
                .iter()
                .map(|&t| prep.most_accurate_one(t))
                .collect();
            let mut top = prep.raw_accuracy(k, &best);
            let key_len = prep.paths[k].tasks.len();
            for (key, &a) in &problem.path_accuracy {
                let same = key.len() == key_len
                    && key
                        .iter()
                        .zip(&prep.paths[k].tasks)
                        .all(|(&(t, _), &u)| t == u);
                if same {
                    top = top.max(a);
                }
            }
            prep.paths[k].top = top;
        }
        Ok(prep)
    }

    fn most_accurate_one(&self, task: usize) -> usize {
        let mut best = self.by_task[task][0];
        for &v in &self.by_task[task] {
            if self.variants[v].accuracy > self.variants[best].accuracy {
                best = v;
            }
        }
        best
    }

    /// Per task, the usable variants of the highest accuracy (Eq 8-9).
    pub fn most_accurate(&self) -> Vec<Vec<usize>> {
        self.by_task
            .iter()
            .map(|vs| {
                let top = vs
                    .iter()
                    .map(|&v| self.variants[v].accuracy)
                    .fold(f64::NEG_INFINITY, f64::max);
                vs.iter()
                    .copied()
                    .filter(|&v| self.variants[v].accuracy >= top)
                    .collect()
            })
            .collect()
    }

    /// `Â(p)` of task path `k` with `combo[pos]` the variant of its task at `pos`.
    pub fn raw_accuracy(&self, k: usize, combo: &[usize]) -> f64 {
        let p = &self.paths[k];
        if !self.problem.path_accuracy.is_empty() {
            let key: Vec<(usize, u32)> = p
                .tasks
                .iter()
                .zip(combo)
                .map(|(&t, &v)| (t, self.variants[v].group))
                .collect();
            if let Some(&a) = self.problem.path_accuracy.get(&key) {
                return a;
            }
        }
        combo.iter().map(|&v| self.variants[v].accuracy).product()
    }

    /// `Â(p)` over the path's best.
    pub fn relative_accuracy(&self, k: usize, combo: &[usize]) -> f64 {
        let top = self.paths[k].top;
        if top > 0.0 {
            self.raw_accuracy(k, combo) / top
        } else {
            0.0
        }
    }

    /// `m(p, i, k)` per query entering the root: branch probabilities to position `pos`
    /// (inclusive) times the multiplicative factors of the variants before it (Eq 1, counting
    /// a variant's own factor towards its children only).
    pub fn multiplier(&self, k: usize, combo: &[usize], pos: usize) -> f64 {
        let p = &self.paths[k];
        let factors: f64 = combo[..pos]
            .iter()
            .map(|&v| self.variants[v].factor)
            .product();
        factors * p.reach[pos]
    }

    /// The largest multiplier any combination of `cand` gives at `task`.
    pub fn max_multiplier(&self, cand: &[Vec<usize>], task: usize) -> f64 {
        let k = self.first_path[task];
        let p = &self.paths[k];
        let pos = self.depth[task];
        let factors: f64 = p.tasks[..pos]
            .iter()
            .map(|&t| {
                cand[t]
                    .iter()
                    .map(|&v| self.variants[v].factor)
                    .fold(0.0, f64::max)
            })
            .product();
        factors * p.reach[pos]
    }

    /// Every combination of `cand` along task path `k` (cartesian product).
    pub fn combos(&self, k: usize, cand: &[Vec<usize>]) -> Vec<Vec<usize>> {
        let mut out: Vec<Vec<usize>> = vec![Vec::new()];
        for &t in &self.paths[k].tasks {
            let mut next = Vec::with_capacity(out.len() * cand[t].len());
            for prefix in &out {
                for &v in &cand[t] {
                    let mut c = prefix.clone();
                    c.push(v);
                    next.push(c);
                }
            }
            out = next;
        }
        out
    }

    /// Step 2's candidates per task: the usable variants less those dominated by another of
    /// the same task and pool (no less accurate, no larger multiplicative factor, and at every
    /// batch of the dominated one no slower: it can replace it in any plan at no loss); then,
    /// if the enumeration would exceed `max_paths` augmented paths (or a task has more than
    /// `max_candidates`), the accuracy/peak-throughput Pareto front of each pool; then, if still
    /// too many, each pool's most accurate and fastest variants first and the others spread
    /// evenly over accuracy.
    pub fn candidates(&self, settings: &LokiSettings) -> Vec<Vec<usize>> {
        let depth = self.paths.iter().map(|p| p.tasks.len()).max().unwrap_or(1);
        let by_paths = (settings.max_paths.max(1) as f64)
            .powf(1.0 / depth as f64)
            .floor() as usize;
        let cap = by_paths.min(settings.max_candidates).max(2);
        self.by_task
            .iter()
            .map(|vs| {
                let kept: Vec<usize> = vs
                    .iter()
                    .copied()
                    .filter(|&v| !vs.iter().any(|&w| self.dominates(w, v)))
                    .collect();
                if kept.len() <= cap {
                    return kept;
                }
                let front: Vec<usize> = kept
                    .iter()
                    .copied()
                    .filter(|&v| !kept.iter().any(|&w| self.peak_dominates(w, v)))
                    .collect();
                if front.len() <= cap {
                    return front;
                }
                self.spread(&front, cap)
            })
            .collect()
    }

    fn dominates(&self, w: usize, v: usize) -> bool {
        if w == v {
            return false;
        }
        let (a, b) = (&self.variants[w], &self.variants[v]);
        if a.pool != b.pool || a.accuracy < b.accuracy || a.factor > b.factor {
            return false;
        }
        let no_slower = b.batches.iter().all(|bb| {
            a.batches
                .iter()
                .any(|ab| ab.batch == bb.batch && ab.latency_ms <= bb.latency_ms)
        });
        let strictly = a.accuracy > b.accuracy
            || a.factor < b.factor
            || b.batches.iter().any(|bb| {
                a.batches
                    .iter()
                    .any(|ab| ab.batch == bb.batch && ab.latency_ms < bb.latency_ms)
            });
        no_slower && (strictly || w < v)
    }

    fn peak_dominates(&self, w: usize, v: usize) -> bool {
        if w == v {
            return false;
        }
        let (a, b) = (&self.variants[w], &self.variants[v]);
        let (qa, qb) = (a.peak_qps(), b.peak_qps());
        a.pool == b.pool
            && a.accuracy >= b.accuracy
            && qa >= qb
            && (a.accuracy > b.accuracy || qa > qb || w < v)
    }

    fn spread(&self, front: &[usize], cap: usize) -> Vec<usize> {
        let mut chosen: Vec<usize> = Vec::with_capacity(cap);
        let mut seen = HashSet::new();
        let mut push = |v: usize, chosen: &mut Vec<usize>| {
            if chosen.len() < cap && seen.insert(v) {
                chosen.push(v);
            }
        };
        // Pools by workers, largest first.
        let mut pools: Vec<usize> = (0..self.pools.len()).collect();
        pools.sort_by_key(|&p| std::cmp::Reverse(self.pools[p].1));
        let in_pool = |p: usize| {
            front
                .iter()
                .copied()
                .filter(move |&v| self.variants[v].pool == p)
        };
        for &p in &pools {
            if let Some(v) = in_pool(p).max_by(|&a, &b| {
                self.variants[a]
                    .accuracy
                    .total_cmp(&self.variants[b].accuracy)
            }) {
                push(v, &mut chosen);
            }
        }
        for &p in &pools {
            if let Some(v) = in_pool(p).max_by(|&a, &b| {
                self.variants[a]
                    .peak_qps()
                    .total_cmp(&self.variants[b].peak_qps())
            }) {
                push(v, &mut chosen);
            }
        }
        let mut rest: Vec<usize> = front
            .iter()
            .copied()
            .filter(|v| !chosen.contains(v))
            .collect();
        rest.sort_by(|&a, &b| {
            self.variants[b]
                .accuracy
                .total_cmp(&self.variants[a].accuracy)
        });
        let slots = cap.saturating_sub(chosen.len());
        if slots >= rest.len() {
            for &v in &rest {
                push(v, &mut chosen);
            }
        } else if slots == 1 {
            push(rest[0], &mut chosen);
        } else if slots > 1 {
            // Evenly spaced over accuracy, both ends included.
            let last = rest.len() - 1;
            for s in 0..slots {
                let idx = (s * last + (slots - 1) / 2) / (slots - 1);
                push(rest[idx.min(last)], &mut chosen);
            }
        }
        chosen.sort_unstable();
        chosen
    }
}

fn validate(problem: &LokiProblem) -> Result<(), LokiError> {
    let bad = |m: String| Err(LokiError::Invalid(m));
    if problem.nodes.is_empty() {
        return bad("the pipeline has no node".into());
    }
    if !(problem.demand_qps.is_finite() && problem.demand_qps >= 0.0) {
        return bad(format!(
            "demand_qps {} must be finite and not negative",
            problem.demand_qps
        ));
    }
    if !(problem.slo_ms.is_finite() && problem.slo_ms > 0.0) {
        return bad(format!("slo_ms {} must be positive", problem.slo_ms));
    }
    if !(problem.comm_latency_ms.is_finite() && problem.comm_latency_ms >= 0.0) {
        return bad(format!(
            "comm_latency_ms {} must not be negative",
            problem.comm_latency_ms
        ));
    }
    for (i, n) in problem.nodes.iter().enumerate() {
        let want = usize::from(i > 0);
        if n.parents.len() != want {
            return Err(LokiError::NotATree {
                node: n.name.clone(),
                parents: n.parents.len(),
            });
        }
        if n.parents.iter().any(|&p| p >= i) {
            return bad(format!(
                "node '{}' (index {i}) has parent {:?}: nodes must be in topological order",
                n.name, n.parents
            ));
        }
        if !(n.branch_probability > 0.0 && n.branch_probability <= 1.0) {
            return bad(format!(
                "node '{}': branch_probability {} must be in (0, 1]",
                n.name, n.branch_probability
            ));
        }
        if n.options.is_empty() {
            return bad(format!("node '{}' has no option", n.name));
        }
        for o in &n.options {
            let v = &o.variant;
            let ok = |x: f64| x.is_finite() && x > 0.0;
            if v.max_batch == 0
                || v.latency.is_empty()
                || v.latency.iter().any(|p| !ok(p.p99_ms))
                || !v.latency.windows(2).all(|w| w[0].batch < w[1].batch)
                || !(0.0..=1.0).contains(&v.accuracy)
            {
                return bad(format!(
                    "node '{}': option '{}' needs max_batch >= 1, an accuracy in [0, 1] and a positive latency profile sorted by batch",
                    n.name, v.name
                ));
            }
        }
    }
    if let Some((k, r)) = problem
        .multiplicative
        .iter()
        .find(|(_, r)| !(r.is_finite() && **r > 0.0))
    {
        return bad(format!(
            "multiplicative factor {r} of {k:?} must be finite and positive"
        ));
    }
    if let Some((k, a)) = problem
        .path_accuracy
        .iter()
        .find(|(_, a)| !(a.is_finite() && **a >= 0.0))
    {
        return bad(format!(
            "path accuracy {a} of {k:?} must be finite and not negative"
        ));
    }
    Ok(())
}
