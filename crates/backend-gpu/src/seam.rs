//! `impl Backend for GpuBackend`: each op runs its GPU kernel when one covers the
//! dtypes, else the host fallback (see [`crate::fallback`]).

use tempra_pool::PoolStats;
use tempra_tensor::{
    AttentionParams, Backend, BinaryOp, DType, ReduceOp, Result, RopeConfig, Storage, Tensor,
    TensorError, UnaryOp,
};

use crate::backend::GpuBackend;
use crate::kernels::{
    attention, copy, elementwise, embedding, experts, linear, matmul, norm, reduce, rope, softmax,
};
use crate::storage::{DeviceBuffer, GpuStorage};

/// Whether every tensor is F32.
fn all_f32(ts: &[&Tensor]) -> bool {
    ts.iter().all(|t| t.dtype() == DType::F32)
}

/// Whether a norm weight/bias dtype is read by the shaders.
fn gpu_float(t: &Tensor) -> bool {
    matches!(t.dtype(), DType::F32 | DType::F16 | DType::BF16)
}

impl Backend for GpuBackend {
    fn name(&self) -> &'static str {
        crate::BACKEND_NAME
    }

    fn allocate(&self, bytes: usize) -> Result<Storage> {
        self.ctx.poll_completions();
        let lease = self
            .ctx
            .pool
            .acquire(bytes)
            .map_err(|source| TensorError::Pool {
                op: "allocate",
                source,
            })?;
        let storage = GpuStorage::new(DeviceBuffer::Pooled(lease), bytes, self.ctx.clone());
        Ok(Storage::Device(Box::new(storage)))
    }

    /// Device memory outside the pool (session-lifetime state: KV caches, a step
    /// arena's buffers), zeroed by wgpu when made; freed when the last view drops.
    fn allocate_persistent(&self, bytes: usize) -> Result<Storage> {
        const OP: &str = "allocate_persistent";
        let size = bytes.max(4).next_multiple_of(4);
        if size as u64 > self.ctx.rules.max_size {
            return Err(crate::GpuError::TooLarge {
                op: OP,
                what: "a persistent buffer",
                bytes: size as u64,
                limit: self.ctx.rules.max_size,
            }
            .into_tensor_error(OP));
        }
        let block = self
            .ctx
            .persistent_memory
            .make(size)
            .map_err(|source| TensorError::Pool { op: OP, source })?;
        let storage = GpuStorage::new(DeviceBuffer::Owned(block), bytes, self.ctx.clone());
        Ok(Storage::Device(Box::new(storage)))
    }

    fn pool_stats(&self) -> PoolStats {
        self.ctx.pool.stats()
    }

    fn handoffs(&self) -> tempra_tensor::Handoffs {
        self.fallback_counts()
    }

    fn upload(&self, src: &[u8], out: &mut Tensor) -> Result<()> {
        const OP: &str = "upload";
        let range = out
            .layout()
            .contiguous_range()
            .ok_or(TensorError::Unsupported {
                op: OP,
                backend: crate::BACKEND_NAME,
                what: "a strided output".into(),
            })?;
        let bb = out.dtype().block_bytes();
        if (range.end - range.start) * bb != src.len() {
            return Err(TensorError::Argument {
                op: OP,
                name: "src",
                reason: format!(
                    "{} bytes for an output of {}",
                    src.len(),
                    (range.end - range.start) * bb
                ),
            });
        }
        let storage = crate::operand::gpu_storage(out)
            .filter(|g| g.is_on(&self.ctx))
            .ok_or(TensorError::Device {
                op: OP,
                found: out.storage().location(),
                expected: crate::BACKEND_NAME,
            })?;
        self.ctx
            .write_bytes(storage.block(), range.start * bb, src)
            .map_err(|e| e.into_tensor_error(OP))
    }

    fn fill(&self, out: &mut Tensor, value: f64) -> Result<()> {
        copy::fill(&self.ctx, out, value).map_err(|e| e.into_tensor_error("fill"))
    }

    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        if copy::supports(src.dtype(), dst.dtype()) {
            return copy::copy(&self.ctx, src, dst).map_err(|e| e.into_tensor_error("copy"));
        }
        self.on_host("copy", &[src], &mut [dst], |r, i, o| {
            r.copy(&i[0], &mut o[0])
        })
    }

    /// Host fallback: quantizing runs the reference (ggml's) search on the host.
    fn quantize(&self, src: &Tensor, out: &mut Tensor) -> Result<()> {
        self.on_host("quantize", &[src], &mut [out], |r, i, o| {
            r.quantize(&i[0], &mut o[0])
        })
    }

    fn unary(&self, op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x, out]) {
            return elementwise::unary(&self.ctx, op, x, out)
                .map_err(|e| e.into_tensor_error(op.name()));
        }
        self.on_host(op.name(), &[x], &mut [out], |r, i, o| {
            r.unary(op, &i[0], &mut o[0])
        })
    }

    fn binary(&self, op: BinaryOp, lhs: &Tensor, rhs: &Tensor, out: &mut Tensor) -> Result<()> {
        if all_f32(&[lhs, rhs, out]) {
            return elementwise::binary(&self.ctx, op, lhs, rhs, out)
                .map_err(|e| e.into_tensor_error(op.name()));
        }
        self.on_host(op.name(), &[lhs, rhs], &mut [out], |r, i, o| {
            r.binary(op, &i[0], &i[1], &mut o[0])
        })
    }

    fn binary_inplace(&self, op: BinaryOp, lhs_out: &mut Tensor, rhs: &Tensor) -> Result<()> {
        if all_f32(&[lhs_out, rhs]) && self.owns(lhs_out) {
            return elementwise::binary_inplace(&self.ctx, op, lhs_out, rhs)
                .map_err(|e| e.into_tensor_error(op.name()));
        }
        if lhs_out.storage().is_host() {
            // A host tensor updated in place: the reference kernel on a host copy of rhs.
            self.count_fallback(op.name());
            let rhs = self
                .to_host(rhs)
                .map_err(|e| e.into_tensor_error(op.name()))?;
            return self.reference.binary_inplace(op, lhs_out, &rhs);
        }
        let lhs = self
            .to_host(lhs_out)
            .map_err(|e| e.into_tensor_error(op.name()))?;
        self.on_host(op.name(), &[&lhs, rhs], &mut [lhs_out], |r, i, o| {
            r.binary(op, &i[0], &i[1], &mut o[0])
        })
    }

    fn binary_scalar(&self, op: BinaryOp, x: &Tensor, scalar: f64, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x, out]) {
            return elementwise::binary_scalar(&self.ctx, op, x, scalar, out)
                .map_err(|e| e.into_tensor_error(op.name()));
        }
        self.on_host(op.name(), &[x], &mut [out], |r, i, o| {
            r.binary_scalar(op, &i[0], scalar, &mut o[0])
        })
    }

    fn reduce(&self, op: ReduceOp, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x, out]) {
            return reduce::reduce(&self.ctx, Some(op), x, dim, out)
                .map_err(|e| e.into_tensor_error(op.name()));
        }
        self.on_host(op.name(), &[x], &mut [out], |r, i, o| {
            r.reduce(op, &i[0], dim, &mut o[0])
        })
    }

    fn argmax(&self, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x]) {
            return reduce::reduce(&self.ctx, None, x, dim, out)
                .map_err(|e| e.into_tensor_error("argmax"));
        }
        self.on_host("argmax", &[x], &mut [out], |r, i, o| {
            r.argmax(&i[0], dim, &mut o[0])
        })
    }

    fn softmax(&self, x: &Tensor, log: bool, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x, out]) {
            return softmax::softmax(&self.ctx, x, log, out)
                .map_err(|e| e.into_tensor_error("softmax"));
        }
        self.on_host("softmax", &[x], &mut [out], |r, i, o| {
            r.softmax(&i[0], log, &mut o[0])
        })
    }

    fn matmul(&self, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
        if gpu_float(a) && gpu_float(b) && out.dtype() == DType::F32 {
            return matmul::matmul(&self.ctx, a, b, out).map_err(|e| e.into_tensor_error("matmul"));
        }
        self.on_host("matmul", &[a, b], &mut [out], |r, i, o| {
            r.matmul(&i[0], &i[1], &mut o[0])
        })
    }

    fn linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        let bias_ok = bias.is_none_or(|b| b.dtype() == DType::F32);
        if all_f32(&[x, out]) && linear::supports(w.dtype()) && bias_ok {
            return linear::linear(&self.ctx, x, w, bias, out)
                .map_err(|e| e.into_tensor_error("linear"));
        }
        match bias {
            Some(b) => self.on_host("linear", &[x, w, b], &mut [out], |r, i, o| {
                r.linear(&i[0], &i[1], Some(&i[2]), &mut o[0])
            }),
            None => self.on_host("linear", &[x, w], &mut [out], |r, i, o| {
                r.linear(&i[0], &i[1], None, &mut o[0])
            }),
        }
    }

    fn expert_linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        ids: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        let bias_ok = bias.is_none_or(|b| b.dtype() == DType::F32);
        if all_f32(&[x, out]) && linear::supports(w.dtype()) && bias_ok && ids.dtype() == DType::U32
        {
            return experts::expert_linear(&self.ctx, x, w, ids, bias, out)
                .map_err(|e| e.into_tensor_error("expert_linear"));
        }
        match bias {
            Some(b) => self.on_host("expert_linear", &[x, w, ids, b], &mut [out], |r, i, o| {
                r.expert_linear(&i[0], &i[1], &i[2], Some(&i[3]), &mut o[0])
            }),
            None => self.on_host("expert_linear", &[x, w, ids], &mut [out], |r, i, o| {
                r.expert_linear(&i[0], &i[1], &i[2], None, &mut o[0])
            }),
        }
    }

    fn top_k(&self, x: &Tensor, values: &mut Tensor, indices: &mut Tensor) -> Result<()> {
        if all_f32(&[x, values]) && indices.dtype() == DType::U32 {
            return experts::top_k(&self.ctx, x, values, indices)
                .map_err(|e| e.into_tensor_error("top_k"));
        }
        self.on_host("top_k", &[x], &mut [values, indices], |r, i, o| {
            let [values, indices] = o else {
                return Err(TensorError::Argument {
                    op: "top_k",
                    name: "outputs",
                    reason: "values and indices expected".into(),
                });
            };
            r.top_k(&i[0], values, indices)
        })
    }

    fn gather(&self, x: &Tensor, indices: &Tensor, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x, out]) && indices.dtype() == DType::U32 {
            return experts::gather(&self.ctx, x, indices, out)
                .map_err(|e| e.into_tensor_error("gather"));
        }
        self.on_host("gather", &[x, indices], &mut [out], |r, i, o| {
            r.gather(&i[0], &i[1], &mut o[0])
        })
    }

    fn weighted_sum(&self, x: &Tensor, weights: &Tensor, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x, weights, out]) {
            return experts::weighted_sum(&self.ctx, x, weights, out)
                .map_err(|e| e.into_tensor_error("weighted_sum"));
        }
        self.on_host("weighted_sum", &[x, weights], &mut [out], |r, i, o| {
            r.weighted_sum(&i[0], &i[1], &mut o[0])
        })
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f64, out: &mut Tensor) -> Result<()> {
        if all_f32(&[x, out]) && gpu_float(w) {
            return norm::norm(&self.ctx, false, x, w, None, eps, out)
                .map_err(|e| e.into_tensor_error("rms_norm"));
        }
        self.on_host("rms_norm", &[x, w], &mut [out], |r, i, o| {
            r.rms_norm(&i[0], &i[1], eps, &mut o[0])
        })
    }

    fn layer_norm(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        eps: f64,
        out: &mut Tensor,
    ) -> Result<()> {
        if all_f32(&[x, out]) && gpu_float(w) && b.is_none_or(gpu_float) {
            return norm::norm(&self.ctx, true, x, w, b, eps, out)
                .map_err(|e| e.into_tensor_error("layer_norm"));
        }
        match b {
            Some(b) => self.on_host("layer_norm", &[x, w, b], &mut [out], |r, i, o| {
                r.layer_norm(&i[0], &i[1], Some(&i[2]), eps, &mut o[0])
            }),
            None => self.on_host("layer_norm", &[x, w], &mut [out], |r, i, o| {
                r.layer_norm(&i[0], &i[1], None, eps, &mut o[0])
            }),
        }
    }

    fn rope(
        &self,
        x: &Tensor,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
        inverse: bool,
        out: &mut Tensor,
    ) -> Result<()> {
        if all_f32(&[x, out]) {
            return rope::rope(&self.ctx, x, positions, config, freq_factors, inverse, out)
                .map_err(|e| e.into_tensor_error("rope"));
        }
        match freq_factors {
            Some(f) => self.on_host("rope", &[x, positions, f], &mut [out], |r, i, o| {
                r.rope(&i[0], &i[1], config, Some(&i[2]), inverse, &mut o[0])
            }),
            None => self.on_host("rope", &[x, positions], &mut [out], |r, i, o| {
                r.rope(&i[0], &i[1], config, None, inverse, &mut o[0])
            }),
        }
    }

    fn embedding(&self, table: &Tensor, ids: &Tensor, out: &mut Tensor) -> Result<()> {
        if embedding::supports(table.dtype()) && out.dtype() == DType::F32 {
            return embedding::embedding(&self.ctx, table, ids, out)
                .map_err(|e| e.into_tensor_error("embedding"));
        }
        self.on_host("embedding", &[table, ids], &mut [out], |r, i, o| {
            r.embedding(&i[0], &i[1], &mut o[0])
        })
    }

    /// Host fallback (a training op).
    fn embedding_backward(&self, ids: &Tensor, grad: &Tensor, out: &mut Tensor) -> Result<()> {
        self.on_host("embedding_backward", &[ids, grad], &mut [out], |r, i, o| {
            r.embedding_backward(&i[0], &i[1], &mut o[0])
        })
    }

    /// Host fallback (a training op).
    fn one_hot(&self, ids: &Tensor, out: &mut Tensor) -> Result<()> {
        self.on_host("one_hot", &[ids], &mut [out], |r, i, o| {
            r.one_hot(&i[0], &mut o[0])
        })
    }

    /// Host fallback (a training op).
    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        out: &mut Tensor,
    ) -> Result<()> {
        self.on_host(
            "cross_entropy",
            &[logits, targets],
            &mut [out],
            |r, i, o| r.cross_entropy(&i[0], &i[1], ignore_index, &mut o[0]),
        )
    }

    /// Host fallback (a training op).
    fn cross_entropy_backward(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        grad: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        self.on_host(
            "cross_entropy_backward",
            &[logits, targets, grad],
            &mut [out],
            |r, i, o| r.cross_entropy_backward(&i[0], &i[1], ignore_index, &i[2], &mut o[0]),
        )
    }

    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        sinks: Option<&Tensor>,
        params: &AttentionParams,
        out: &mut Tensor,
    ) -> Result<()> {
        if attention::supports(q, k, v, sinks) && out.dtype() == DType::F32 {
            return attention::attention(&self.ctx, q, k, v, sinks, params, out)
                .map_err(|e| e.into_tensor_error("attention"));
        }
        let inputs: &[&Tensor] = match sinks {
            Some(s) => &[q, k, v, s],
            None => &[q, k, v],
        };
        self.on_host("attention", inputs, &mut [out], |r, i, o| {
            r.attention(&i[0], &i[1], &i[2], i.get(3), params, &mut o[0])
        })
    }

    /// Host fallback (a training op).
    fn attention_backward(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        params: &AttentionParams,
        grad: &Tensor,
        dq: &mut Tensor,
        dk: &mut Tensor,
        dv: &mut Tensor,
    ) -> Result<()> {
        self.on_host(
            "attention_backward",
            &[q, k, v, grad],
            &mut [dq, dk, dv],
            |r, i, o| {
                let [odq, odk, odv] = o else {
                    return Err(TensorError::Argument {
                        op: "attention_backward",
                        name: "outputs",
                        reason: "three gradients expected".into(),
                    });
                };
                r.attention_backward(&i[0], &i[1], &i[2], params, &i[3], odq, odk, odv)
            },
        )
    }
}
