//! One replica of a parallel run and the collective operations it takes part in, on Burn's
//! local collective or MPI; the watchdog that ends a run whose peers stopped answering.

use super::Scale;
use super::{end_process, shard, sync_running_state, text_digest};
#[cfg(feature = "mpi")]
use super::{flat::FlatGrads, mpi_job};
use crate::error::{EmberError, Result};
use burn::collective::{self, CollectiveError, PeerId, ReduceOperation};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// The run directory while it holds no completed epoch: removed when the run ends here, as
    /// a failed new run's is.
    fresh: Mutex<Option<(std::path::PathBuf, bool)>>,
    /// Ends the whole MPI job rather than this process alone.
    mpi: bool,
    /// The run's SIGINT/SIGTERM flag: a replica that waits in a collective operation for
    /// [`INTERRUPT_GRACE`] after it is set ends the run.
    interrupt: Option<Arc<AtomicBool>>,
}

/// How long an interrupted run may wait for its peers to reach the batch boundary where every
/// replica stops together, before the watchdog ends it (the run keeps its last completed epoch).
pub(crate) const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

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
        if self.mpi {
            end_process(1);
        }
        std::process::exit(1)
    }
}

/// Started once per parallel run: ends the process (under MPI: the job) when a replica has
/// waited in a collective operation for longer than the timeout (a peer died or hangs), or when
/// a replica thread failed while the others wait for it. The run directory keeps its last
/// completed epoch (every file is written atomically), so the run resumes.
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
                let interrupted = watch
                    .interrupt
                    .as_ref()
                    .is_some_and(|f| f.load(Ordering::SeqCst));
                if interrupted && waiting.is_some_and(|w| w > INTERRUPT_GRACE.as_millis() as u64) {
                    watch.abort(&format!(
                        "interrupted while waiting {} s for the other replicas: training \
                         stopped; the run directory keeps its last completed epoch: continue \
                         with --resume",
                        INTERRUPT_GRACE.as_secs()
                    ));
                }
                if waiting.is_some_and(|w| w > watch.timeout.as_millis() as u64) {
                    watch.abort(&format!(
                        "no answer from the other replicas for {} s (a process of the run died \
                         or hangs): training stopped; the run directory keeps its last completed \
                         epoch: continue with --resume",
                        watch.timeout.as_secs()
                    ));
                }
            }
        })
        .expect("spawning the watchdog thread");
}

/// How a replica reaches the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// Burn's local collective: the replicas are threads of this process.
    Local,
    /// MPI: one replica per process of the job.
    #[cfg(feature = "mpi")]
    Mpi,
}

/// One replica of a run: its place among all replicas and the collective operations it takes
/// part in. A single-device run has one replica and exchanges nothing.
#[derive(Clone)]
pub(crate) struct Replica {
    /// Global index of this replica (its MPI rank, or its peer id in this process).
    index: usize,
    /// Replicas of the run in all processes.
    count: usize,
    /// Index among this process's replicas (0: the one that writes the run directory, on the
    /// process that writes).
    local: usize,
    link: Link,
    verify: bool,
    watch: Option<Arc<Watch>>,
    /// Print every collective operation (`EMBER_COLLECTIVE_LOG` set).
    trace: bool,
    /// What the gradient exchanges of the current epoch cost.
    exchange: Arc<Mutex<Exchange>>,
}

/// The gradient exchanges of an epoch: steps, bytes a step (a rank's all-reduce buffer under
/// MPI; 0 where Burn's collective moves device tensors) and the wall time spent in them.
#[derive(Clone, Copy, Debug, Default)]
struct Exchange {
    steps: usize,
    bytes: usize,
    seconds: f64,
}

impl Replica {
    /// The only replica of a single-device run.
    pub(crate) fn single() -> Self {
        Self {
            index: 0,
            count: 1,
            local: 0,
            link: Link::Local,
            verify: false,
            watch: None,
            trace: false,
            exchange: Default::default(),
        }
    }

    /// The replicas of this process for `scale`, the watchdog started; `interrupt` is the run's
    /// SIGINT/SIGTERM flag, which the watchdog watches too ([`INTERRUPT_GRACE`]).
    pub(crate) fn local_replicas(scale: &Scale, interrupt: Option<Arc<AtomicBool>>) -> Vec<Self> {
        if !scale.is_parallel() {
            return vec![Self::single()];
        }
        #[cfg(feature = "mpi")]
        let link = match scale.job {
            Some(_) => Link::Mpi,
            None => Link::Local,
        };
        #[cfg(not(feature = "mpi"))]
        let link = Link::Local;
        let watch = Arc::new(Watch {
            since: (0..scale.devices).map(|_| AtomicU64::new(0)).collect(),
            timeout: scale.timeout,
            failed: Mutex::new(None),
            fresh: Mutex::new(None),
            mpi: scale.job.is_some(),
            interrupt,
        });
        watchdog(watch.clone());
        (0..scale.devices)
            .map(|local| Self {
                index: scale.peer(local),
                count: scale.replicas(),
                local,
                link,
                verify: scale.verify,
                watch: Some(watch.clone()),
                trace: std::env::var_os("EMBER_COLLECTIVE_LOG").is_some(),
                exchange: Default::default(),
            })
            .collect()
    }

    /// Whether gradients are exchanged.
    pub(crate) fn is_parallel(&self) -> bool {
        self.count > 1
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

    /// Joins Burn's collective with this replica's device (blocks until every replica of this
    /// process has joined; an MPI job is joined by [`connect`]).
    pub(crate) fn register<B: Backend>(&self, scale: &Scale, device: &B::Device) -> Result<()> {
        if !self.is_parallel() || self.link != Link::Local {
            return Ok(());
        }
        let peer = PeerId(self.index as u32);
        self.collective("joining the other replicas", || {
            collective::register::<B>(peer, device.clone(), scale.config())
        })
    }

    /// Leaves the collective at the end of a run.
    pub(crate) fn finish<B: Backend>(&self) {
        if self.is_parallel() && self.link == Link::Local {
            let peer = PeerId(self.index as u32);
            let _ = self.collective("leaving", || collective::finish_collective::<B>(peer));
        }
    }

    /// The mean of every replica's gradients of `model`'s parameters.
    pub(crate) fn mean_grads<B: AutodiffBackend, M: Module<B>>(
        &self,
        model: &M,
        grads: GradientsParams,
    ) -> Result<GradientsParams> {
        if !self.is_parallel() {
            return Ok(grads);
        }
        let clock = std::time::Instant::now();
        let (grads, bytes) = match self.link {
            Link::Local => {
                let _ = model;
                let peer = PeerId(self.index as u32);
                let grads = self.collective("averaging gradients", || {
                    grads.all_reduce::<B::InnerBackend>(peer, ReduceOperation::Mean)
                })?;
                (grads, 0)
            }
            #[cfg(feature = "mpi")]
            Link::Mpi => {
                let mut grads = grads;
                let flat = FlatGrads::<B>::take(model, &mut grads);
                let bytes = std::mem::size_of_val(&flat.values[..]);
                let summed =
                    self.collective("averaging gradients", || Ok(mpi_job::sum_f32(&flat.values)))?;
                flat.put_back(model, &mut grads, summed, self.count);
                (grads, bytes)
            }
        };
        let mut e = self.exchange.lock().unwrap_or_else(|e| e.into_inner());
        e.steps += 1;
        e.bytes = bytes;
        e.seconds += clock.elapsed().as_secs_f64();
        Ok(grads)
    }

    /// `model` with every float state that is not trained (batch norm's running mean and
    /// variance: Burn's `RunningState`) replaced by its mean over the replicas. Each replica
    /// updates those statistics from its own shard, so without this the replicas drift apart
    /// (and `--verify-replicas` says so); the mean of the shards' running means is the running
    /// mean of the whole step's batch. A model without such state exchanges nothing.
    pub(crate) fn mean_state<B: AutodiffBackend, M: Module<B>>(
        &self,
        model: M,
        device: &B::Device,
    ) -> Result<M> {
        if !self.is_parallel() {
            return Ok(model);
        }
        struct Take<B: AutodiffBackend>(Vec<Tensor<B::InnerBackend, 1>>);
        impl<B: AutodiffBackend> ModuleVisitor<B> for Take<B> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                let value = param.val();
                if !value.is_require_grad() {
                    let n = value.shape().num_elements();
                    self.0.push(value.inner().reshape([n]));
                }
            }
        }
        sync_running_state(&model);
        let mut take = Take::<B>(Vec::new());
        model.visit(&mut take);
        if take.0.is_empty() {
            return Ok(model);
        }
        let values = Tensor::cat(take.0, 0)
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .expect("f32 data");
        let summed = self.sum::<B::InnerBackend>(&values, device)?;
        struct Put {
            mean: Vec<f32>,
            offset: usize,
        }
        impl<B: AutodiffBackend> ModuleMapper<B> for Put {
            fn map_float<const D: usize>(
                &mut self,
                param: Param<Tensor<B, D>>,
            ) -> Param<Tensor<B, D>> {
                let (id, value, mapper) = param.consume();
                if value.is_require_grad() {
                    return Param::from_mapped_value(id, value, mapper);
                }
                let shape = value.shape();
                let n = shape.num_elements();
                let part = self.mean[self.offset..self.offset + n].to_vec();
                self.offset += n;
                let mean = Tensor::from_data(TensorData::new(part, shape), &value.device());
                Param::from_mapped_value(id, mean, mapper)
            }
        }
        let scale = 1.0 / self.count as f32;
        Ok(model.map(&mut Put {
            mean: summed.iter().map(|v| v * scale).collect(),
            offset: 0,
        }))
    }

    /// What the gradient exchanges since the last call cost, against `train_seconds` of
    /// training (forward, backward, exchange, optimizer) in that time: one line, or `None`
    /// when nothing was exchanged. Starts the next count.
    pub(crate) fn exchange_report(&self, train_seconds: f64) -> Option<String> {
        let e = std::mem::take(&mut *self.exchange.lock().unwrap_or_else(|e| e.into_inner()));
        if e.steps == 0 {
            return None;
        }
        let per_step = e.seconds / e.steps as f64;
        let step = train_seconds / e.steps as f64;
        let size = match e.bytes {
            0 => String::new(),
            b => format!("{:.2} MB a step, ", b as f64 / 1e6),
        };
        Some(format!(
            "gradient all-reduce over {} replicas: {size}{:.1} ms of a {:.1} ms step ({:.0} %)",
            self.count,
            per_step * 1e3,
            step * 1e3,
            100.0 * per_step / step.max(f64::MIN_POSITIVE)
        ))
    }

    /// The element-wise sum of `values` over all replicas.
    pub(crate) fn sum<B: Backend>(&self, values: &[f32], device: &B::Device) -> Result<Vec<f32>> {
        if !self.is_parallel() {
            return Ok(values.to_vec());
        }
        match self.link {
            Link::Local => {
                let tensor = Tensor::<B, 1>::from_data(
                    TensorData::new(values.to_vec(), [values.len()]),
                    device,
                );
                let peer = PeerId(self.index as u32);
                let summed = self.collective("exchanging the batch's loss", || {
                    collective::all_reduce::<B>(
                        peer,
                        tensor.into_primitive().tensor(),
                        ReduceOperation::Sum,
                    )
                })?;
                let summed =
                    Tensor::<B, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(summed));
                Ok(summed
                    .into_data()
                    .convert::<f32>()
                    .to_vec()
                    .expect("f32 data"))
            }
            #[cfg(feature = "mpi")]
            Link::Mpi => {
                let _ = device;
                self.collective("exchanging the batch's loss", || {
                    Ok(mpi_job::sum_f32(values))
                })
            }
        }
    }

    /// Every replica's `value`, by replica index.
    pub(crate) fn gather<B: Backend>(&self, value: u64, device: &B::Device) -> Result<Vec<u64>> {
        match self.link {
            Link::Local => {
                // each value crosses the all-reduce as four 16-bit pieces, exact in f32
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
            #[cfg(feature = "mpi")]
            Link::Mpi => {
                self.collective("comparing the replicas", || Ok(mpi_job::gather_u64(value)))
            }
        }
    }

    /// Checks that every replica holds `digest`; `what` says what differs otherwise (every
    /// replica reaches the same verdict).
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
            Some(other) => Err(self.verdict(what(other))),
        }
    }

    /// Checks that every replica was started with the same settings (`(name, value)` pairs in
    /// a fixed order), naming the first that differs from replica 0's.
    pub(crate) fn agree_settings<B: Backend>(
        &self,
        settings: &[(&'static str, String)],
        device: &B::Device,
    ) -> Result<()> {
        if !self.is_parallel() {
            return Ok(());
        }
        let digests = settings
            .iter()
            .map(|(name, value)| self.gather::<B>(text_digest(&format!("{name} {value}")), device))
            .collect::<Result<Vec<_>>>()?;
        for ((name, value), all) in settings.iter().zip(&digests) {
            if let Some(other) = all.iter().position(|&d| d != all[0]) {
                let here = match self.index {
                    0 => format!("replica 0 has {name} {value}"),
                    i if all[i] != all[0] => format!("this replica ({i}) has {name} {value}"),
                    i => format!("replica {i} has {name} {value}, as replica 0"),
                };
                return Err(self.verdict(format!(
                    "replica {other} was started with another {name} than replica 0 ({here}): \
                     start every rank with the same options; a resumed run needs the same \
                     checkpoint everywhere"
                )));
            }
        }
        Ok(())
    }

    /// An error every replica of the run reaches together: under MPI, rank 0 reports it and
    /// the others end without repeating it ([`EmberError::Reported`]).
    fn verdict(&self, why: String) -> EmberError {
        #[cfg(feature = "mpi")]
        if self.link == Link::Mpi && self.index != 0 {
            return EmberError::Reported(why);
        }
        EmberError::Collective(why)
    }

    /// Waits until every replica has reached the end of the epoch (under MPI; in one process
    /// the first step of the next epoch does). Timed on rank 0 only: it arrives last, after its
    /// evaluation and checkpoint, which the others wait for however long they take (a rank that
    /// dies ends the MPI job anyway).
    pub(crate) fn end_epoch(&self) -> Result<()> {
        #[cfg(feature = "mpi")]
        if self.is_parallel() && self.link == Link::Mpi {
            if self.index == 0 {
                self.collective("waiting for the others at the end of the epoch", || {
                    mpi_job::barrier();
                    Ok(())
                })?;
            } else {
                mpi_job::barrier();
            }
        }
        Ok(())
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

fn describe(e: &CollectiveError) -> String {
    match e {
        CollectiveError::LocalServerMissing => {
            "Burn's collective server in this process stopped".into()
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
