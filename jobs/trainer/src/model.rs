//! The model: a multi-layer perceptron with one tanh hidden layer and a softmax output,
//! trained by minibatch SGD on the cross-entropy, forward and backward written out by hand.
//!
//! With several threads each minibatch is cut into one shard per thread; every thread sums
//! the gradient of its shard, waits for the others at a barrier, then applies the same
//! averaged update to its own replica of the weights (so the replicas stay equal and no thread
//! waits for a leader). Gradients are double-buffered by minibatch parity, so one barrier per
//! minibatch is enough: a thread cannot overwrite a buffer before every thread has read it,
//! since it must first pass the next barrier.

use std::sync::{Barrier, PoisonError, RwLock};
use std::thread;

use crate::data::Dataset;
use crate::rng::SplitMix64;

/// Samples per minibatch unless the run says otherwise.
pub const BATCH: usize = 64;

/// The weights of a one-hidden-layer perceptron, in one flat vector: the input-to-hidden
/// matrix row by input feature, the hidden biases, the hidden-to-output matrix row by hidden
/// unit, the output biases.
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    features: usize,
    hidden: usize,
    classes: usize,
    params: Vec<f32>,
}

/// Accuracy and mean cross-entropy on a dataset.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// Share of samples whose most probable class is their label.
    pub accuracy: f64,
    /// Mean cross-entropy, in nats.
    pub loss: f64,
}

/// The weights split into their four parts.
struct Parts<'a> {
    w1: &'a [f32],
    b1: &'a [f32],
    w2: &'a [f32],
    b2: &'a [f32],
}

/// The per-sample buffers of a forward and backward pass.
struct Scratch {
    hidden: Vec<f32>,
    output: Vec<f32>,
    delta_hidden: Vec<f32>,
}

impl Mlp {
    /// A freshly initialised model (Glorot-uniform weights, zero biases).
    pub fn new(features: usize, hidden: usize, classes: usize, rng: &mut SplitMix64) -> Self {
        let mut params = vec![0.0; Self::param_count(features, hidden, classes)];
        let bound1 = (6.0 / (features + hidden) as f64).sqrt();
        let bound2 = (6.0 / (hidden + classes) as f64).sqrt();
        let (w1, rest) = params.split_at_mut(features * hidden);
        let w2 = &mut rest[hidden..hidden + hidden * classes];
        for (weights, bound) in [(w1, bound1), (w2, bound2)] {
            for w in weights {
                *w = ((2.0 * rng.next_f64() - 1.0) * bound) as f32;
            }
        }
        Self { features, hidden, classes, params }
    }

    /// A model with the given weights, or `None` when their number does not fit the shape.
    pub fn from_params(features: usize, hidden: usize, classes: usize, params: Vec<f32>) -> Option<Self> {
        (params.len() == Self::param_count(features, hidden, classes)).then_some(Self {
            features,
            hidden,
            classes,
            params,
        })
    }

    /// Number of weights and biases of a model of this shape.
    pub fn param_count(features: usize, hidden: usize, classes: usize) -> usize {
        features * hidden + hidden + hidden * classes + classes
    }

    /// Hidden units.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The weights, in the layout described on [`Mlp`].
    pub fn params(&self) -> &[f32] {
        &self.params
    }

    fn parts(&self) -> Parts<'_> {
        let (w1, rest) = self.params.split_at(self.features * self.hidden);
        let (b1, rest) = rest.split_at(self.hidden);
        let (w2, b2) = rest.split_at(self.hidden * self.classes);
        Parts { w1, b1, w2, b2 }
    }

    fn scratch(&self) -> Scratch {
        Scratch {
            hidden: vec![0.0; self.hidden],
            output: vec![0.0; self.classes],
            delta_hidden: vec![0.0; self.hidden],
        }
    }

    /// Fills `scratch` with the hidden activations and the class probabilities of `x`.
    fn forward(&self, x: &[f32], scratch: &mut Scratch) {
        let p = self.parts();
        let a = &mut scratch.hidden;
        a.copy_from_slice(p.b1);
        // Row by input feature: an axpy per feature, which the compiler vectorises.
        for (&xj, row) in x.iter().zip(p.w1.chunks_exact(self.hidden)) {
            for (ah, w) in a.iter_mut().zip(row) {
                *ah += xj * w;
            }
        }
        for ah in a.iter_mut() {
            *ah = ah.tanh();
        }
        let o = &mut scratch.output;
        o.copy_from_slice(p.b2);
        for (&ah, row) in a.iter().zip(p.w2.chunks_exact(self.classes)) {
            for (oc, w) in o.iter_mut().zip(row) {
                *oc += ah * w;
            }
        }
        let max = o.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for oc in o.iter_mut() {
            *oc = (*oc - max).exp();
            sum += *oc;
        }
        for oc in o.iter_mut() {
            *oc /= sum;
        }
    }

    /// Adds the cross-entropy gradient of the samples `indices` of `data` to `grad`.
    fn accumulate_gradient(&self, data: &Dataset, indices: &[u32], grad: &mut [f32], scratch: &mut Scratch) {
        let p = self.parts();
        let (g_w1, rest) = grad.split_at_mut(self.features * self.hidden);
        let (g_b1, rest) = rest.split_at_mut(self.hidden);
        let (g_w2, g_b2) = rest.split_at_mut(self.hidden * self.classes);
        for &i in indices {
            let (x, label) = (data.sample(i as usize), data.label(i as usize));
            self.forward(x, scratch);
            // Softmax and cross-entropy together: the output delta is p − onehot(label).
            let delta_out = &mut scratch.output;
            delta_out[label] -= 1.0;
            for (g, d) in g_b2.iter_mut().zip(delta_out.iter()) {
                *g += d;
            }
            let rows = g_w2.chunks_exact_mut(self.classes).zip(p.w2.chunks_exact(self.classes));
            for (((g_row, w_row), &ah), dh) in rows.zip(&scratch.hidden).zip(&mut scratch.delta_hidden) {
                let mut back = 0.0;
                for ((g, w), d) in g_row.iter_mut().zip(w_row).zip(delta_out.iter()) {
                    *g += ah * d;
                    back += w * d;
                }
                *dh = back * (1.0 - ah * ah);
            }
            for (g, d) in g_b1.iter_mut().zip(&scratch.delta_hidden) {
                *g += d;
            }
            for (&xj, g_row) in x.iter().zip(g_w1.chunks_exact_mut(self.hidden)) {
                for (g, d) in g_row.iter_mut().zip(&scratch.delta_hidden) {
                    *g += xj * d;
                }
            }
        }
    }

    /// One SGD step: subtracts `scale` times the sum of `grads`.
    fn step(&mut self, grads: &[&[f32]], scale: f32) {
        for (i, w) in self.params.iter_mut().enumerate() {
            let sum: f32 = grads.iter().map(|g| g[i]).sum();
            *w -= scale * sum;
        }
    }

    /// Accuracy and mean loss on `data`, split over `threads` threads.
    pub fn evaluate(&self, data: &Dataset, threads: usize) -> Evaluation {
        let threads = threads.clamp(1, data.len().max(1));
        let bounds = |t: usize| data.len() * t / threads;
        let part = |t: usize| {
            let mut scratch = self.scratch();
            let (mut correct, mut loss) = (0usize, 0.0f64);
            for i in bounds(t)..bounds(t + 1) {
                self.forward(data.sample(i), &mut scratch);
                let label = data.label(i);
                let probs = &scratch.output;
                let best = (0..probs.len()).fold(0, |b, c| if probs[c] > probs[b] { c } else { b });
                correct += usize::from(best == label);
                loss -= f64::from(probs[label].max(f32::MIN_POSITIVE)).ln();
            }
            (correct, loss)
        };
        let parts: Vec<(usize, f64)> = thread::scope(|s| {
            let others: Vec<_> = (1..threads).map(|t| s.spawn(move || part(t))).collect();
            let first = part(0);
            std::iter::once(first)
                .chain(others.into_iter().map(|h| h.join().expect("evaluation thread panicked")))
                .collect()
        });
        let correct: usize = parts.iter().map(|p| p.0).sum();
        let loss: f64 = parts.iter().map(|p| p.1).sum();
        let n = data.len().max(1) as f64;
        Evaluation { accuracy: correct as f64 / n, loss: loss / n }
    }

    /// One pass of minibatch SGD over `data` in the order `order`, at learning rate `rate`,
    /// in minibatches of `batch` samples, each one's gradient computed by `threads` threads.
    pub fn train_epoch(&mut self, data: &Dataset, order: &[u32], rate: f32, batch: usize, threads: usize) {
        let batch = batch.max(1);
        let threads = threads.clamp(1, batch);
        let size = self.params.len();
        if threads == 1 {
            let (mut grad, mut scratch) = (vec![0.0; size], self.scratch());
            for batch in order.chunks(batch) {
                grad.fill(0.0);
                self.accumulate_gradient(data, batch, &mut grad, &mut scratch);
                self.step(&[&grad], rate / batch.len() as f32);
            }
            return;
        }
        let buffers: [Vec<RwLock<Vec<f32>>>; 2] =
            std::array::from_fn(|_| (0..threads).map(|_| RwLock::new(vec![0.0; size])).collect());
        let shared = Shared { data, order, rate, batch, threads, buffers: &buffers, barrier: &Barrier::new(threads) };
        thread::scope(|s| {
            for worker in 1..threads {
                let mut replica = self.clone();
                s.spawn(move || replica.train_shards(worker, &shared));
            }
            self.train_shards(0, &shared);
        });
    }

    /// Thread `worker`'s part of [`Mlp::train_epoch`]: its shard of every minibatch.
    fn train_shards(&mut self, worker: usize, shared: &Shared<'_>) {
        let mut scratch = self.scratch();
        for (k, batch) in shared.order.chunks(shared.batch).enumerate() {
            let buffers = &shared.buffers[k % 2];
            {
                let mut grad = buffers[worker].write().unwrap_or_else(PoisonError::into_inner);
                grad.fill(0.0);
                let shard = &batch[batch.len() * worker / shared.threads..batch.len() * (worker + 1) / shared.threads];
                self.accumulate_gradient(shared.data, shard, &mut grad, &mut scratch);
            }
            shared.barrier.wait();
            let guards: Vec<_> = buffers.iter().map(|b| b.read().unwrap_or_else(PoisonError::into_inner)).collect();
            let grads: Vec<&[f32]> = guards.iter().map(|g| g.as_slice()).collect();
            self.step(&grads, shared.rate / batch.len() as f32);
        }
    }
}

/// What the threads of one [`Mlp::train_epoch`] share.
#[derive(Clone, Copy)]
struct Shared<'a> {
    data: &'a Dataset,
    order: &'a [u32],
    rate: f32,
    batch: usize,
    threads: usize,
    /// Per minibatch parity, one gradient buffer per thread.
    buffers: &'a [Vec<RwLock<Vec<f32>>>; 2],
    barrier: &'a Barrier,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Problem;

    fn setup() -> (Dataset, Mlp) {
        let split = Problem { seed: 5, samples: 300, features: 6, classes: 3 }.generate();
        let model = Mlp::new(6, 10, 3, &mut SplitMix64::new(9));
        (split.train, model)
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let (data, model) = setup();
        let indices = [0, 1, 2, 3];
        let mut grad = vec![0.0; model.params.len()];
        model.accumulate_gradient(&data, &indices, &mut grad, &mut model.scratch());
        let loss = |m: &Mlp| -> f64 {
            let mut scratch = m.scratch();
            indices
                .iter()
                .map(|&i| {
                    m.forward(data.sample(i as usize), &mut scratch);
                    -f64::from(scratch.output[data.label(i as usize)]).ln()
                })
                .sum()
        };
        // A weight of each of the four parts: w1, b1, w2, b2.
        for p in [3, 6 * 10 + 2, 6 * 10 + 10 + 7, model.params.len() - 1] {
            let (mut plus, mut minus) = (model.clone(), model.clone());
            plus.params[p] += 1e-2;
            minus.params[p] -= 1e-2;
            let numeric = (loss(&plus) - loss(&minus)) / 2e-2;
            assert!((numeric - f64::from(grad[p])).abs() < 1e-2, "param {p}: {numeric} vs {}", grad[p]);
        }
    }

    #[test]
    fn threads_share_the_work_of_one_sgd_step() {
        let (data, model) = setup();
        let order: Vec<u32> = (0..data.len() as u32).collect();
        let (mut one, mut three) = (model.clone(), model);
        one.train_epoch(&data, &order, 0.1, BATCH, 1);
        three.train_epoch(&data, &order, 0.1, BATCH, 3);
        // Equal up to the order of the floating-point sums.
        for (a, b) in one.params.iter().zip(&three.params) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
        assert_ne!(one.params, Mlp::new(6, 10, 3, &mut SplitMix64::new(9)).params);
    }

    #[test]
    fn the_batch_size_sets_how_many_steps_an_epoch_takes() {
        let (data, model) = setup();
        let order: Vec<u32> = (0..data.len() as u32).collect();
        // One batch of the whole epoch is one step on the mean gradient: on any number of
        // threads, and not the same as many small steps.
        let (mut whole, mut whole_threads, mut small) = (model.clone(), model.clone(), model);
        whole.train_epoch(&data, &order, 0.1, data.len(), 1);
        whole_threads.train_epoch(&data, &order, 0.1, data.len(), 4);
        small.train_epoch(&data, &order, 0.1, 8, 1);
        for (a, b) in whole.params.iter().zip(&whole_threads.params) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
        let apart = whole.params.iter().zip(&small.params).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(apart > 1e-3, "batches of 8 train otherwise than one batch: {apart}");
    }

    #[test]
    fn evaluation_is_the_same_on_any_number_of_threads() {
        let (data, model) = setup();
        let (one, four) = (model.evaluate(&data, 1), model.evaluate(&data, 4));
        assert_eq!(one.accuracy, four.accuracy);
        assert!((one.loss - four.loss).abs() < 1e-9);
    }

    #[test]
    fn from_params_refuses_the_wrong_number_of_weights() {
        assert!(Mlp::from_params(2, 3, 2, vec![0.0; Mlp::param_count(2, 3, 2)]).is_some());
        assert!(Mlp::from_params(2, 3, 2, vec![0.0; 5]).is_none());
    }
}
