//! MFCC features of speech (no maintained MFCC crate exists, so the mel filterbank and the DCT
//! are Ember's; the FFT is `rustfft`'s).
//!
//! Per utterance: pre-emphasis (`x[n] − 0.97·x[n−1]`), frames of 25 ms every 10 ms (at 8 kHz:
//! 200 samples every 80; a clip shorter than one frame is zero-padded to one), a Hamming window,
//! the power spectrum of a 256-point FFT, 26 triangular filters evenly spaced on the HTK mel
//! scale (`mel = 2595·log10(1 + f/700)`) from 0 Hz to half the sample rate, the natural log of
//! each filter's energy (floored at 1e-10), the orthonormal DCT-II keeping 13 coefficients
//! (`c0` included); then Δ and ΔΔ (regression over ±2 frames, edges repeated) and, per
//! utterance, every one of the 39 features shifted to mean 0 and scaled to variance 1.

use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

/// The front end's settings (the defaults are the module's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MfccConfig {
    /// Samples per second.
    pub sample_rate: u32,
    /// Samples per frame.
    pub frame: usize,
    /// Samples between frame starts.
    pub hop: usize,
    /// FFT size (at least `frame`).
    pub fft: usize,
    /// Mel filters.
    pub mels: usize,
    /// Cepstral coefficients kept (`c0` first).
    pub coeffs: usize,
}

impl Default for MfccConfig {
    fn default() -> Self {
        Self {
            sample_rate: 8000,
            frame: 200,
            hop: 80,
            fft: 256,
            mels: 26,
            coeffs: 13,
        }
    }
}

/// Hz to mel (HTK).
pub fn hz_to_mel(hz: f64) -> f64 {
    2595.0 * (1.0 + hz / 700.0).log10()
}

/// Mel (HTK) to Hz.
pub fn mel_to_hz(mel: f64) -> f64 {
    700.0 * (10f64.powf(mel / 2595.0) - 1.0)
}

/// The triangular mel filters over the `fft / 2 + 1` power-spectrum bins: filter `j` rises from
/// edge `j` to 1 at edge `j + 1` and falls to 0 at edge `j + 2`, the `mels + 2` edges evenly
/// spaced in mel from 0 to the Nyquist frequency (weights computed at each bin's frequency).
pub fn filterbank(cfg: &MfccConfig) -> Vec<Vec<f64>> {
    let bins = cfg.fft / 2 + 1;
    let nyquist = f64::from(cfg.sample_rate) / 2.0;
    let top = hz_to_mel(nyquist);
    let edges: Vec<f64> = (0..cfg.mels + 2)
        .map(|i| mel_to_hz(top * i as f64 / (cfg.mels + 1) as f64))
        .collect();
    (0..cfg.mels)
        .map(|j| {
            let (lo, mid, hi) = (edges[j], edges[j + 1], edges[j + 2]);
            (0..bins)
                .map(|b| {
                    let f = b as f64 * f64::from(cfg.sample_rate) / cfg.fft as f64;
                    if f <= lo || f >= hi {
                        0.0
                    } else if f <= mid {
                        (f - lo) / (mid - lo)
                    } else {
                        (hi - f) / (hi - mid)
                    }
                })
                .collect()
        })
        .collect()
}

/// The orthonormal DCT-II of `x`, its first `keep` coefficients:
/// `c_k = s_k·Σ_n x_n·cos(π·k·(2n + 1) / 2N)`, `s_0 = √(1/N)`, `s_k = √(2/N)`.
pub fn dct(x: &[f64], keep: usize) -> Vec<f64> {
    let n = x.len() as f64;
    (0..keep)
        .map(|k| {
            let s = if k == 0 {
                (1.0 / n).sqrt()
            } else {
                (2.0 / n).sqrt()
            };
            s * x
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    v * (std::f64::consts::PI * k as f64 * (2.0 * i as f64 + 1.0) / (2.0 * n)).cos()
                })
                .sum::<f64>()
        })
        .collect()
}

/// Δ of a sequence of feature vectors: `d_t = Σ_{i=1..2} i·(c_{t+i} − c_{t−i}) / (2·Σ i²)`, frames
/// past either end repeating the end frame.
pub fn deltas(frames: &[Vec<f64>]) -> Vec<Vec<f64>> {
    const N: usize = 2;
    let denom = 2.0 * (1..=N).map(|i| (i * i) as f64).sum::<f64>();
    let last = frames.len().saturating_sub(1);
    (0..frames.len())
        .map(|t| {
            (0..frames[t].len())
                .map(|f| {
                    (1..=N)
                        .map(|i| {
                            let next = &frames[(t + i).min(last)];
                            let prev = &frames[t.saturating_sub(i)];
                            i as f64 * (next[f] - prev[f])
                        })
                        .sum::<f64>()
                        / denom
                })
                .collect()
        })
        .collect()
}

/// The per-frame steps: window, FFT power spectrum, mel filters, log.
pub struct FrontEnd {
    cfg: MfccConfig,
    bank: Vec<Vec<f64>>,
    window: Vec<f64>,
    fft: std::sync::Arc<dyn rustfft::Fft<f64>>,
}

impl FrontEnd {
    /// The filterbank, Hamming window and FFT plan of `cfg`.
    pub fn new(cfg: &MfccConfig) -> Self {
        let n = cfg.frame;
        Self {
            cfg: *cfg,
            bank: filterbank(cfg),
            window: (0..n)
                .map(|i| {
                    0.54 - 0.46 * (2.0 * std::f64::consts::PI * i as f64 / (n - 1) as f64).cos()
                })
                .collect(),
            fft: FftPlanner::<f64>::new().plan_fft_forward(cfg.fft),
        }
    }

    /// The log mel energies of one frame of `cfg.frame` samples (windowed, zero-padded to the
    /// FFT size; each energy floored at 1e-10 before the log).
    pub fn log_mel(&self, frame: &[f64]) -> Vec<f64> {
        let mut buf = vec![Complex::new(0.0, 0.0); self.cfg.fft];
        for (b, (s, w)) in buf.iter_mut().zip(frame.iter().zip(&self.window)) {
            b.re = s * w;
        }
        self.fft.process(&mut buf);
        let power: Vec<f64> = buf[..self.cfg.fft / 2 + 1]
            .iter()
            .map(|c| c.norm_sqr() / self.cfg.fft as f64)
            .collect();
        self.bank
            .iter()
            .map(|f| {
                f.iter()
                    .zip(&power)
                    .map(|(w, p)| w * p)
                    .sum::<f64>()
                    .max(1e-10)
                    .ln()
            })
            .collect()
    }
}

/// The 39 features (13 MFCCs, Δ, ΔΔ) of every frame of `samples` (in `[-1, 1]`), normalised
/// per utterance (module documentation).
pub fn mfcc(samples: &[f32], cfg: &MfccConfig) -> Vec<Vec<f32>> {
    let front = FrontEnd::new(cfg);
    let mut x: Vec<f64> = samples.iter().map(|&s| f64::from(s)).collect();
    for i in (1..x.len()).rev() {
        x[i] -= 0.97 * x[i - 1];
    }
    if x.len() < cfg.frame {
        x.resize(cfg.frame, 0.0);
    }
    let frames = 1 + (x.len() - cfg.frame) / cfg.hop;
    let cepstra: Vec<Vec<f64>> = (0..frames)
        .map(|t| {
            dct(
                &front.log_mel(&x[t * cfg.hop..t * cfg.hop + cfg.frame]),
                cfg.coeffs,
            )
        })
        .collect();
    let d1 = deltas(&cepstra);
    let d2 = deltas(&d1);
    let mut feats: Vec<Vec<f64>> = cepstra
        .into_iter()
        .zip(d1)
        .zip(d2)
        .map(|((c, d), dd)| c.into_iter().chain(d).chain(dd).collect())
        .collect();
    normalise(&mut feats);
    feats
        .into_iter()
        .map(|f| f.into_iter().map(|v| v as f32).collect())
        .collect()
}

/// Every feature shifted to mean 0 and scaled to variance 1 over the frames (a constant feature
/// becomes 0).
pub fn normalise(frames: &mut [Vec<f64>]) {
    let Some(width) = frames.first().map(Vec::len) else {
        return;
    };
    let n = frames.len() as f64;
    for f in 0..width {
        let mean = frames.iter().map(|v| v[f]).sum::<f64>() / n;
        let var = frames.iter().map(|v| (v[f] - mean).powi(2)).sum::<f64>() / n;
        let scale = if var > 1e-12 { 1.0 / var.sqrt() } else { 0.0 };
        for v in frames.iter_mut() {
            v[f] = (v[f] - mean) * scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mel_scale_is_htk_s() {
        // 1000 Hz is 1000 mel by construction of the scale (to 0.02)
        assert!(
            (hz_to_mel(1000.0) - 999.985).abs() < 1e-3,
            "{}",
            hz_to_mel(1000.0)
        );
        assert!(
            (hz_to_mel(4000.0) - 2146.06).abs() < 1e-2,
            "{}",
            hz_to_mel(4000.0)
        );
        for hz in [0.0, 300.0, 3999.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9);
        }
    }

    #[test]
    fn the_dct_is_orthonormal() {
        // a constant keeps all its energy in c0 = √N
        let c = dct(&[1.0; 8], 8);
        assert!((c[0] - 8f64.sqrt()).abs() < 1e-12);
        assert!(c[1..].iter().all(|v| v.abs() < 1e-12));
        // Parseval: the energy is unchanged
        let x = [0.3, -1.0, 2.5, 0.0, 0.7, -0.2];
        let e: f64 = x.iter().map(|v| v * v).sum();
        let ce: f64 = dct(&x, 6).iter().map(|v| v * v).sum();
        assert!((e - ce).abs() < 1e-12);
        // the known second coefficient of [1, 2, 3, 4]: √(2/4)·Σ n·cos(π(2n+1)/8)
        let c1 = dct(&[1.0, 2.0, 3.0, 4.0], 2)[1];
        assert!((c1 + 2.230_442_497_387_663).abs() < 1e-12, "{c1}");
    }

    #[test]
    fn the_filters_are_triangles_in_mel_order() {
        let cfg = MfccConfig::default();
        let bank = filterbank(&cfg);
        assert_eq!((bank.len(), bank[0].len()), (26, 129));
        let mut last_peak = 0;
        for f in &bank {
            assert!(f.iter().all(|&w| (0.0..=1.0).contains(&w)));
            let peak = (0..f.len()).max_by(|&a, &b| f[a].total_cmp(&f[b])).unwrap();
            assert!(peak >= last_peak, "peaks rise with the filter index");
            last_peak = peak;
            // one rise then one fall
            let nonzero: Vec<usize> = (0..f.len()).filter(|&b| f[b] > 0.0).collect();
            assert!(
                nonzero.windows(2).all(|w| w[1] == w[0] + 1),
                "contiguous support"
            );
        }
    }

    #[test]
    fn a_tone_lights_the_filter_around_its_frequency() {
        let cfg = MfccConfig::default();
        let tone = 1000.0;
        // the filter whose centre is nearest 1 kHz in mel
        let top = hz_to_mel(4000.0);
        let centre = |j: usize| mel_to_hz(top * (j + 1) as f64 / 27.0);
        let nearest = (0..26)
            .min_by(|&a, &b| {
                (centre(a) - tone)
                    .abs()
                    .total_cmp(&(centre(b) - tone).abs())
            })
            .unwrap();
        // the tone's first frame through the front end's filters
        let samples: Vec<f32> = (0..800)
            .map(|n| (2.0 * std::f64::consts::PI * tone * n as f64 / 8000.0).sin() as f32 * 0.5)
            .collect();
        let frame: Vec<f64> = samples[..200].iter().map(|&s| f64::from(s)).collect();
        let energies = FrontEnd::new(&cfg).log_mel(&frame);
        let loudest = (0..26)
            .max_by(|&a, &b| energies[a].total_cmp(&energies[b]))
            .unwrap();
        assert!(loudest.abs_diff(nearest) <= 1, "{loudest} vs {nearest}");
        // and the whole front end gives 39 normalised features per 10 ms frame
        let f = mfcc(&samples, &cfg);
        assert_eq!((f.len(), f[0].len()), (1 + (800 - 200) / 80, 39));
    }

    #[test]
    fn deltas_of_a_ramp_are_its_slope_and_features_are_normalised() {
        let ramp: Vec<Vec<f64>> = (0..10).map(|t| vec![3.0 * t as f64, 1.0]).collect();
        let d = deltas(&ramp);
        for row in &d[2..8] {
            assert!((row[0] - 3.0).abs() < 1e-12 && row[1].abs() < 1e-12);
        }
        let mut x = ramp.clone();
        normalise(&mut x);
        let mean: f64 = x.iter().map(|v| v[0]).sum::<f64>() / 10.0;
        let var: f64 = x.iter().map(|v| v[0] * v[0]).sum::<f64>() / 10.0;
        assert!(mean.abs() < 1e-12 && (var - 1.0).abs() < 1e-12);
        assert!(
            x.iter().all(|v| v[1] == 0.0),
            "a constant feature becomes 0"
        );
        // a clip shorter than a frame still gives one frame
        assert_eq!(mfcc(&[0.1; 50], &MfccConfig::default()).len(), 1);
    }
}
