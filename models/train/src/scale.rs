//! Data parallelism on Burn's own collective operations (`burn-collective`, reached as
//! `burn::collective`): `--devices N` replicas in one process, `--ddp` across processes and
//! machines (docs/scaling.md).
//!
//! Every replica holds the whole model, trains on its share of each batch and averages its
//! gradients with the others' (`GradientsParams::all_reduce`, Burn's all-reduce: a local server
//! per process, a websocket orchestrator between processes) before its own optimizer step, so
//! the replicas stay equal without ever sending weights. Ember adds what a long run needs
//! around it: shards that keep the global batch order of a single-device run, one exchange per
//! step of the batch's loss and of the stop decision (a NaN or SIGINT on one replica stops all
//! at the same batch), a check at the start that every process trains the same run from the
//! same weights, an optional bit-for-bit check of the replicas after every step
//! (`--verify-replicas`), and a watchdog that ends the process with a clear error when a peer
//! does not answer (a killed process must not leave the others hanging).

use crate::error::{EmberError, Result};
use burn::collective::{
    self, AllReduceStrategy, CollectiveConfig, CollectiveError, PeerId, ReduceOperation,
};
use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::optim::GradientsParams;
use burn::prelude::*;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How many replicas train a run, and where (`--devices`, `--ddp`).
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    /// Replicas in this process, one per device of the backend (`--devices`, at least 1).
    pub devices: usize,
    /// Other processes training the same run (`--ddp`).
    pub ddp: Option<Ddp>,
    /// After every step, check that all replicas hold bit-identical parameters
    /// (`--verify-replicas`; one read of the parameters per step).
    pub verify: bool,
    /// How long a replica waits in a collective operation before the run is ended as lost
    /// (`--collective-timeout`).
    pub timeout: Duration,
}

impl Default for Scale {
    fn default() -> Self {
        Self {
            devices: 1,
            ddp: None,
            verify: false,
            timeout: Duration::from_secs(300),
        }
    }
}

/// This process's place among the processes of a distributed run (`--ddp`).
#[derive(Clone, Debug, PartialEq)]
pub struct Ddp {
    /// This process's rank, below `world` (`--rank`); rank 0 serves the orchestrator.
    pub rank: u32,
    /// Number of processes (`--world`).
    pub world: u32,
    /// `HOST:PORT` of the orchestrator that rank 0 serves (`--coordinator`).
    pub coordinator: String,
    /// Port of this process's tensor service (`--ddp-port`; default: the coordinator's port +
    /// 1 + rank).
    pub port: Option<u16>,
    /// Host name or address the other processes reach this one at (`--ddp-host`; default: the
    /// address of the interface that routes to the coordinator).
    pub host: Option<String>,
}

impl Scale {
    /// Replicas of the run in all its processes.
    pub fn replicas(&self) -> usize {
        self.devices * self.ddp.as_ref().map_or(1, |d| d.world as usize)
    }

    /// Whether more than one replica trains (then gradients are exchanged).
    pub fn is_parallel(&self) -> bool {
        self.replicas() > 1
    }

    /// Checks the options alone, before any device or network is touched: one error naming
    /// the option.
    pub fn validate(&self) -> Result<()> {
        if self.devices == 0 {
            return Err(EmberError::Invalid("--devices must be at least 1".into()));
        }
        if self.timeout.is_zero() {
            return Err(EmberError::Invalid(
                "--collective-timeout must be at least 1 second".into(),
            ));
        }
        if let Some(d) = &self.ddp {
            if d.world == 0 {
                return Err(EmberError::Invalid("--world must be at least 1".into()));
            }
            if d.rank >= d.world {
                return Err(EmberError::Invalid(format!(
                    "--rank {} is not below --world {} (ranks are 0..{})",
                    d.rank,
                    d.world,
                    d.world - 1
                )));
            }
            d.coordinator_port()?;
        }
        Ok(())
    }

    /// The global index of local replica `local`: processes in rank order, devices in order.
    fn peer(&self, local: usize) -> usize {
        self.ddp.as_ref().map_or(0, |d| d.rank as usize) * self.devices + local
    }

    /// Burn's collective configuration of this process.
    fn config(&self, node: Option<&Node>) -> CollectiveConfig {
        let config = CollectiveConfig::default()
            .with_num_devices(self.devices)
            .with_local_all_reduce_strategy(AllReduceStrategy::Tree(2));
        match (&self.ddp, node) {
            (Some(d), Some(node)) => config
                .with_num_nodes(d.world)
                .with_global_address(address(&d.coordinator))
                .with_node_address(address(&format!("{}:{}", node.host, node.port)))
                .with_data_service_port(node.port)
                .with_global_all_reduce_strategy(AllReduceStrategy::Ring),
            _ => config,
        }
    }
}

fn address(host_port: &str) -> burn_communication::Address {
    use std::str::FromStr;
    burn_communication::Address::from_str(&format!("ws://{host_port}"))
        .expect("any string is an address")
}

impl Ddp {
    fn coordinator_port(&self) -> Result<u16> {
        let bad = || {
            EmberError::Invalid(format!(
                "--coordinator {}: expected HOST:PORT, e.g. 127.0.0.1:29500",
                self.coordinator
            ))
        };
        let (host, port) = self.coordinator.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() || port == 0 {
            return Err(bad());
        }
        Ok(port)
    }

    fn coordinator_addr(&self) -> Result<SocketAddr> {
        self.coordinator
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                EmberError::Invalid(format!(
                    "--coordinator {}: the host name does not resolve",
                    self.coordinator
                ))
            })
    }

    /// This process's tensor-service port.
    fn node_port(&self) -> Result<u16> {
        match self.port {
            Some(p) => Ok(p),
            None => u16::try_from(self.coordinator_port()? as u32 + 1 + self.rank).map_err(|_| {
                EmberError::Invalid(
                    "--coordinator's port + 1 + --rank is above 65535: set --ddp-port".into(),
                )
            }),
        }
    }
}

/// What this process serves to the others of a `--ddp` run.
#[derive(Clone, Debug)]
struct Node {
    host: String,
    port: u16,
}

/// Joins the processes of a `--ddp` run, before the run directory is touched: rank 0 starts
/// Burn's collective orchestrator on the coordinator's port; every rank checks that its
/// tensor-service port is free and that the orchestrator answers within the timeout. Every
/// failure is one clear error.
pub fn connect(scale: &Scale) -> Result<Option<Connected>> {
    let Some(d) = &scale.ddp else {
        return Ok(None);
    };
    let port = d.node_port()?;
    let coordinator = d.coordinator_addr()?;
    // Before Burn's websocket servers start: they would install an INFO-level logger.
    // `EMBER_COLLECTIVE_LOG=error|warn|info|debug|trace` shows what Burn's collective does.
    // Ember reports a lost peer itself (one error line): Burn's own logs, and the panics of its
    // network tasks when a peer goes away, are shown only then.
    let level = std::env::var("EMBER_COLLECTIVE_LOG")
        .ok()
        .and_then(|l| l.parse().ok());
    let _ = tracing_subscriber::fmt()
        .with_max_level(level.unwrap_or(tracing_subscriber::filter::LevelFilter::OFF))
        .with_writer(std::io::stderr)
        .try_init();
    if level.is_none() {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let network = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("tokio-"));
            if !network {
                default(info)
            }
        }));
    }
    free_port(port, "--ddp-port (this process's tensor service)")?;
    if d.rank == 0 {
        let listen = d.coordinator_port()?;
        free_port(listen, "the --coordinator port")?;
        start_orchestrator(listen);
    }
    let deadline = Instant::now() + scale.timeout;
    loop {
        match TcpStream::connect_timeout(&coordinator, Duration::from_secs(1)) {
            Ok(stream) => {
                let host = match &d.host {
                    Some(h) => h.clone(),
                    None => stream
                        .local_addr()
                        .map_err(|e| EmberError::Collective(format!("local address: {e}")))?
                        .ip()
                        .to_string(),
                };
                return Ok(Some(Connected {
                    node: Node { host, port },
                }));
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(EmberError::Collective(format!(
                    "cannot reach the coordinator {} within {} s ({e}): start rank 0 with the \
                     same --coordinator, and check the address and the firewall",
                    d.coordinator,
                    scale.timeout.as_secs()
                )));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// A joined `--ddp` process ([`connect`]): what it serves to the others.
#[derive(Clone, Debug)]
pub struct Connected {
    node: Node,
}

fn free_port(port: u16, what: &str) -> Result<()> {
    TcpListener::bind(("0.0.0.0", port)).map(drop).map_err(|e| {
        EmberError::Collective(format!(
            "{what}: port {port} cannot be opened ({e}); choose another"
        ))
    })
}

/// Serves Burn's global collective orchestrator on `port` for the life of the process.
fn start_orchestrator(port: u16) {
    std::thread::Builder::new()
        .name("ember-orchestrator".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a tokio runtime");
            runtime.block_on(burn::collective::start_global_orchestrator(port));
        })
        .expect("spawning the orchestrator thread");
}

/// Milliseconds since the Unix epoch (never 0).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_millis() as u64)
        .max(1)
}

/// What the watchdog watches: when each replica entered its current collective operation
/// (0: in none), and the first failure of a replica thread.
struct Watch {
    since: Vec<AtomicU64>,
    timeout: Duration,
    failed: Mutex<Option<String>>,
    /// What a timeout most likely means right now (said with the error).
    hint: Mutex<Option<&'static str>>,
    /// The run directory while it holds no completed epoch: removed when the run ends here, as
    /// a failed new run's is.
    fresh: Mutex<Option<(std::path::PathBuf, bool)>>,
}

impl Watch {
    fn abort(&self, why: &str) -> ! {
        let fresh = self.fresh.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((dir, created)) = fresh {
            let _ = crate::run::clear(&dir);
            if created {
                let _ = std::fs::remove_dir(&dir);
            }
        }
        eprintln!("error: data parallel: {why}");
        std::process::exit(1)
    }
}

/// What a hang at the second cross-process all-reduce means with Burn 0.21 (docs/scaling.md).
pub(crate) const BURN_COLLECTIVE_0_21: &str = "burn-collective 0.21.0 deadlocks on every \
    cross-process all-reduce after the first (its SyncService::sync compares a copy of its peer \
    list and never clears the list itself), so --ddp cannot train on Burn 0.21 as published: \
    build Ember against a burn-collective with that line fixed (docs/scaling.md)";

/// Started once per parallel run: ends the process when a replica has waited in a collective
/// operation for longer than the timeout (a peer died or hangs), or when a replica thread failed
/// while the others wait for it. The run directory keeps its last completed epoch (every file is
/// written atomically), so the run resumes.
fn watchdog(watch: Arc<Watch>) {
    std::thread::Builder::new()
        .name("ember-watchdog".into())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let now = now_ms();
                let waiting = watch
                    .since
                    .iter()
                    .map(|s| s.load(Ordering::SeqCst))
                    .filter(|&s| s != 0)
                    .map(|s| now.saturating_sub(s))
                    .max();
                let failed = watch
                    .failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let (Some(why), Some(_)) = (&failed, waiting) {
                    watch.abort(why);
                }
                if waiting.is_some_and(|w| w > watch.timeout.as_millis() as u64) {
                    let hint = *watch.hint.lock().unwrap_or_else(|e| e.into_inner());
                    let why = match hint {
                        Some(hint) => format!(
                            "no answer from the other replicas for {} s: {hint}",
                            watch.timeout.as_secs()
                        ),
                        None => format!(
                            "no answer from the other replicas for {} s (a process of the run \
                             died or hangs): training stopped; the run directory keeps its last \
                             completed epoch: continue with --resume",
                            watch.timeout.as_secs()
                        ),
                    };
                    watch.abort(&why);
                }
            }
        })
        .expect("spawning the watchdog thread");
}

/// One replica of a run: its place among all replicas and the collective operations it takes
/// part in. A single-device run has one replica and exchanges nothing.
#[derive(Clone)]
pub(crate) struct Replica {
    /// Global index (peer id) of this replica.
    index: usize,
    /// Replicas of the run in all processes.
    count: usize,
    /// Index among this process's replicas (0: the one that writes the run directory).
    local: usize,
    verify: bool,
    watch: Option<Arc<Watch>>,
    /// Print every collective operation (`EMBER_COLLECTIVE_LOG` set).
    trace: bool,
}

impl Replica {
    /// The only replica of a single-device run.
    pub(crate) fn single() -> Self {
        Self {
            index: 0,
            count: 1,
            local: 0,
            verify: false,
            watch: None,
            trace: false,
        }
    }

    /// The replicas of this process for `scale`, the watchdog started.
    pub(crate) fn local_replicas(scale: &Scale) -> Vec<Self> {
        if !scale.is_parallel() {
            return vec![Self::single()];
        }
        let watch = Arc::new(Watch {
            since: (0..scale.devices).map(|_| AtomicU64::new(0)).collect(),
            timeout: scale.timeout,
            failed: Mutex::new(None),
            hint: Mutex::new(None),
            fresh: Mutex::new(None),
        });
        watchdog(watch.clone());
        (0..scale.devices)
            .map(|local| Self {
                index: scale.peer(local),
                count: scale.replicas(),
                local,
                verify: scale.verify,
                watch: Some(watch.clone()),
                trace: std::env::var_os("EMBER_COLLECTIVE_LOG").is_some(),
            })
            .collect()
    }

    /// Whether gradients are exchanged.
    pub(crate) fn is_parallel(&self) -> bool {
        self.count > 1
    }

    /// Says what a timeout from now on most likely means (`None`: a lost process).
    pub(crate) fn hint(&self, hint: Option<&'static str>) {
        if let Some(w) = &self.watch {
            *w.hint.lock().unwrap_or_else(|e| e.into_inner()) = hint;
        }
    }

    /// Names the new run directory the watchdog clears (and removes, when `created`) if it
    /// ends the process before an epoch completed (`None` once one has).
    pub(crate) fn fresh_run(&self, dir: Option<(&std::path::Path, bool)>) {
        if let Some(w) = &self.watch {
            *w.fresh.lock().unwrap_or_else(|e| e.into_inner()) =
                dir.map(|(d, created)| (d.to_path_buf(), created));
        }
    }

    /// Records a replica thread's failure: the watchdog ends the process with it as soon as
    /// another replica waits in a collective operation (the other replicas cannot go on alone).
    pub(crate) fn fail(&self, why: String) {
        if let Some(w) = &self.watch {
            let mut failed = w.failed.lock().unwrap_or_else(|e| e.into_inner());
            failed.get_or_insert(why);
        }
    }

    /// This replica's share of an epoch's order, in the order a single device would take it:
    /// the order padded (from its start) to a multiple of the replica count, then every
    /// `count`-th item from this replica's index, so all replicas take the same number of
    /// steps of equal batches and each global batch is a contiguous run of the single-device
    /// order.
    pub(crate) fn shard(&self, order: Vec<usize>) -> Vec<usize> {
        shard(order, self.index, self.count)
    }

    /// Runs one collective operation with the watchdog informed, Burn's errors and panics
    /// turned into one [`EmberError`].
    fn collective<T>(
        &self,
        what: &str,
        op: impl FnOnce() -> std::result::Result<T, CollectiveError>,
    ) -> Result<T> {
        if self.trace {
            eprintln!("replica {}: {what}", self.index);
        }
        let since = self.watch.as_ref().map(|w| &w.since[self.local]);
        if let Some(s) = since {
            s.store(now_ms(), Ordering::SeqCst);
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(op));
        if let Some(s) = since {
            s.store(0, Ordering::SeqCst);
        }
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(EmberError::Collective(format!("{what}: {}", describe(&e)))),
            Err(panic) => Err(EmberError::Collective(format!(
                "{what}: {}",
                panic_message(&panic)
            ))),
        }
    }

    /// Joins Burn's collective with this replica's device (blocks until every replica of every
    /// process has joined).
    pub(crate) fn register<B: Backend>(
        &self,
        scale: &Scale,
        connected: Option<&Connected>,
        device: &B::Device,
    ) -> Result<()> {
        if !self.is_parallel() {
            return Ok(());
        }
        let config = scale.config(connected.map(|c| &c.node));
        let peer = PeerId(self.index as u32);
        self.collective("joining the other replicas", || {
            collective::register::<B>(peer, device.clone(), config)
        })
    }

    /// Leaves the collective at the end of a run.
    pub(crate) fn finish<B: Backend>(&self) {
        if self.is_parallel() {
            let peer = PeerId(self.index as u32);
            let _ = self.collective("leaving", || collective::finish_collective::<B>(peer));
        }
    }

    /// The mean of every replica's gradients (Burn's all-reduce, parameter by parameter).
    pub(crate) fn mean_grads<B: Backend>(&self, grads: GradientsParams) -> Result<GradientsParams> {
        if !self.is_parallel() {
            return Ok(grads);
        }
        let peer = PeerId(self.index as u32);
        self.collective("averaging gradients", || {
            grads.all_reduce::<B>(peer, ReduceOperation::Mean)
        })
    }

    /// The element-wise sum of `values` over all replicas.
    pub(crate) fn sum<B: Backend>(&self, values: &[f32], device: &B::Device) -> Result<Vec<f32>> {
        if !self.is_parallel() {
            return Ok(values.to_vec());
        }
        let tensor =
            Tensor::<B, 1>::from_data(TensorData::new(values.to_vec(), [values.len()]), device);
        let peer = PeerId(self.index as u32);
        let summed = self.collective("exchanging the batch's loss", || {
            collective::all_reduce::<B>(
                peer,
                tensor.into_primitive().tensor(),
                ReduceOperation::Sum,
            )
        })?;
        let summed = Tensor::<B, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(summed));
        Ok(summed
            .into_data()
            .convert::<f32>()
            .to_vec()
            .expect("f32 data"))
    }

    /// Every replica's `value`, by replica index (each value crosses the all-reduce as four
    /// 16-bit pieces, exactly representable in f32).
    pub(crate) fn gather<B: Backend>(&self, value: u64, device: &B::Device) -> Result<Vec<u64>> {
        let mut slots = vec![0f32; 4 * self.count];
        for (k, slot) in slots[4 * self.index..4 * self.index + 4]
            .iter_mut()
            .enumerate()
        {
            *slot = ((value >> (16 * k)) & 0xFFFF) as f32;
        }
        let all = self.sum::<B>(&slots, device)?;
        Ok(all
            .chunks(4)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u64, |v, (k, &x)| v | ((x as u64) << (16 * k)))
            })
            .collect())
    }

    /// Checks that every replica holds `digest`; `what` says what differs otherwise.
    pub(crate) fn agree<B: Backend>(
        &self,
        digest: u64,
        device: &B::Device,
        what: impl FnOnce(usize) -> String,
    ) -> Result<()> {
        if !self.is_parallel() {
            return Ok(());
        }
        let all = self.gather::<B>(digest, device)?;
        match all.iter().position(|&d| d != all[0]) {
            None => Ok(()),
            Some(other) => Err(EmberError::Collective(what(other))),
        }
    }

    /// Whether every step is checked ([`Self::verify_step`]).
    pub(crate) fn verifies(&self) -> bool {
        self.verify && self.is_parallel()
    }

    /// Index among this process's replicas.
    pub(crate) fn local(&self) -> usize {
        self.local
    }

    /// Checks after a step that all replicas hold bit-identical parameters
    /// (`--verify-replicas`; `digest`: [`param_digest`] of this replica's model).
    pub(crate) fn verify_step<B: Backend>(
        &self,
        digest: u64,
        device: &B::Device,
        epoch: usize,
        batch: usize,
    ) -> Result<()> {
        self.agree::<B>(digest, device, |r| {
            format!(
                "--verify-replicas: replica {r}'s parameters differ from replica 0's after \
                 epoch {epoch}, batch {batch}"
            )
        })
    }
}

/// How a collective error that means a lost peer ends (the kill test looks for it).
const PEER_LOST: &str = "a process of the run died or is unreachable: training stopped; the run \
    directory keeps its last completed epoch: continue with --resume";

fn describe(e: &CollectiveError) -> String {
    match e {
        CollectiveError::Global(g) => {
            format!("{g:?} ({PEER_LOST})")
        }
        // The local server ends when its link to the other processes fails: a peer died.
        CollectiveError::LocalServerMissing => {
            format!("Burn's collective server in this process stopped ({PEER_LOST})")
        }
        CollectiveError::RegisterParamsMismatch => {
            "the processes were started with different --devices, --world or addresses".into()
        }
        other => format!("{other:?}"),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a collective operation failed".into())
}

/// Replica `index`'s share of `order` among `count` replicas: the order padded (from its start)
/// to a multiple of `count`, then every `count`-th item from `index`. All replicas get the same
/// number of items, and step k of all of them together is items k·count.. of the padded order.
pub fn shard(order: Vec<usize>, index: usize, count: usize) -> Vec<usize> {
    if count == 1 || order.is_empty() {
        return order;
    }
    let padded = order.len().div_ceil(count) * count;
    (index..padded)
        .step_by(count)
        .map(|i| order[i % order.len()])
        .collect()
}

/// A 64-bit FNV-1a digest of a model's parameters: every parameter's module path, shape and
/// value bits, in the module's order.
pub fn param_digest<B: Backend, M: Module<B>>(model: &M) -> u64 {
    let mut h = Fnv::default();
    for (path, (shape, values)) in burn_hinm::module::params(model) {
        h.write(path.as_bytes());
        for d in shape {
            h.write(&(d as u64).to_le_bytes());
        }
        for v in values {
            h.write(&v.to_bits().to_le_bytes());
        }
    }
    h.0
}

/// A digest of `text` (the settings every process of a run must share).
pub(crate) fn text_digest(text: &str) -> u64 {
    let mut h = Fnv::default();
    h.write(text.as_bytes());
    h.0
}

struct Fnv(u64);
impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}
impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Gives every parameter an id from its position in the module: processes that build the same
/// model then name each parameter alike, which Burn's gradient all-reduce relies on (it pairs
/// parameters by sorted id; fresh ids are random per process).
pub(crate) fn positional_ids<B: Backend, M: Module<B>>(model: M) -> M {
    struct Renumber(u64);
    impl<B: Backend> ModuleMapper<B> for Renumber {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (_, tensor, mapper) = param.consume();
            self.0 += 1;
            Param::from_mapped_value(ParamId::from(self.0), tensor, mapper)
        }
    }
    model.map(&mut Renumber(0))
}
