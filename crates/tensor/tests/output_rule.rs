//! The output-taking (`*_into`) ops: the same results as the allocating ops, and the
//! output rule of `Backend` enforced by `ExecContext` (shape, dtype, contiguity, a buffer
//! held by the output alone, no overlap with an input, writable storage).

use tempra_tensor::{
    AttentionParams, BinaryOp, DType, ExecContext, RopeConfig, RopeScaling, RopeStyle, Tensor,
    TensorError, UnaryOp,
};

fn ctx() -> ExecContext {
    ExecContext::reference()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec_f32().expect("values")
}

#[test]
fn into_variants_equal_the_allocating_ops() -> Result<(), TensorError> {
    let c = ctx();
    let x = c.randn(&[3, 8], DType::F32, 0.0, 1.0, 1)?;
    let w = c.randn(&[5, 8], DType::F32, 0.0, 1.0, 2)?;
    let b = c.randn(&[5], DType::F32, 0.0, 1.0, 3)?;
    let g = c.randn(&[8], DType::F32, 1.0, 0.1, 4)?;

    let mut out = c.output(&[3, 5], DType::F32)?;
    c.linear_into(&x, &w, Some(&b), &mut out)?;
    assert_eq!(values(&out), values(&c.linear(&x, &w, Some(&b))?));

    let mut out = c.output(&[3, 8], DType::F32)?;
    c.rms_norm_into(&x, &g, 1e-5, &mut out)?;
    assert_eq!(values(&out), values(&c.rms_norm(&x, &g, 1e-5)?));

    c.unary_into(UnaryOp::Silu, &x, &mut out)?;
    assert_eq!(values(&out), values(&c.unary(UnaryOp::Silu, &x)?));

    c.binary_scalar_into(BinaryOp::Mul, &x, 0.5, &mut out)?;
    assert_eq!(values(&out), values(&c.mul_scalar(&x, 0.5)?));

    c.binary_into(BinaryOp::Mul, &x, &g, &mut out)?;
    assert_eq!(values(&out), values(&c.mul(&x, &g)?));

    let mut acc = c.persistent_copy(&x)?;
    c.binary_assign(BinaryOp::Add, &mut acc, &g)?;
    assert_eq!(values(&acc), values(&c.add(&x, &g)?));

    let ids = c.from_slice(&[4u32, 0, 2], &[3])?;
    let mut emb = c.output(&[3, 8], DType::F32)?;
    let table = c.randn(&[6, 8], DType::F32, 0.0, 1.0, 5)?;
    c.embedding_into(&table, &ids, &mut emb)?;
    assert_eq!(values(&emb), values(&c.embedding(&table, &ids)?));

    let heads = x.reshape(&[3, 2, 4])?;
    let positions = c.from_slice(&[0u32, 1, 2], &[3])?;
    let rope = RopeConfig {
        rotary_dims: 4,
        theta: 10000.0,
        style: RopeStyle::Neox,
        scaling: RopeScaling::None,
        attention_factor: 1.0,
    };
    let mut roped = c.output(&[3, 2, 4], DType::F32)?;
    c.rope_into(&heads, &positions, &rope, None, &mut roped)?;
    assert_eq!(
        values(&roped),
        values(&c.rope(&heads, &positions, &rope, None)?)
    );

    let params = AttentionParams {
        causal: true,
        scale: 0.5,
        q_start: 0,
        window: None,
        softcap: None,
    };
    let mut attn = c.output(&[3, 2, 4], DType::F32)?;
    c.attention_into(&roped, &heads, &heads, &params, &mut attn)?;
    assert_eq!(
        values(&attn),
        values(&c.attention(&roped, &heads, &heads, &params)?)
    );

    let router = c.randn(&[3, 6], DType::F32, 0.0, 1.0, 6)?;
    let (mut top, mut chosen) = (
        c.output(&[3, 2], DType::F32)?,
        c.output(&[3, 2], DType::U32)?,
    );
    c.top_k_into(&router, 2, &mut top, &mut chosen)?;
    let (want_top, want_chosen) = c.top_k(&router, 2)?;
    assert_eq!(values(&top), values(&want_top));
    assert_eq!(chosen.to_vec::<u32>()?, want_chosen.to_vec::<u32>()?);
    let mut picked = c.output(&[3, 2], DType::F32)?;
    c.gather_into(&router, &chosen, &mut picked)?;
    assert_eq!(values(&picked), values(&top));
    let experts = c.randn(&[6, 5, 8], DType::F32, 0.0, 1.0, 7)?;
    let mut slots = c.output(&[3, 2, 5], DType::F32)?;
    let tokens = x.unsqueeze(1)?;
    c.expert_linear_into(&tokens, &experts, &chosen, None, &mut slots)?;
    let want = c.expert_linear(&tokens, &experts, &chosen, None)?;
    assert_eq!(values(&slots), values(&want));
    let mut combined = c.output(&[3, 5], DType::F32)?;
    c.weighted_sum_into(&slots, &top, &mut combined)?;
    assert_eq!(values(&combined), values(&c.weighted_sum(&slots, &top)?));
    // Two outputs of top_k may not share a buffer.
    let mut same = c.output(&[3, 2], DType::F32)?;
    let mut alias = same.clone();
    assert!(c.top_k_into(&router, 2, &mut same, &mut alias).is_err());

    let mut ids_out = c.output(&[3], DType::U32)?;
    c.write_from_slice(&[7u32, 8, 9], &mut ids_out)?;
    assert_eq!(ids_out.to_vec::<u32>()?, [7, 8, 9]);
    Ok(())
}

#[test]
fn outputs_that_break_the_rule_are_errors_naming_the_op() -> Result<(), TensorError> {
    let c = ctx();
    let x = c.randn(&[2, 4], DType::F32, 0.0, 1.0, 1)?;
    let g = c.full(&[4], DType::F32, 1.0)?;
    let message = |e: TensorError| e.to_string();

    // Wrong shape and wrong dtype.
    let mut out = c.output(&[2, 3], DType::F32)?;
    let e = c.rms_norm_into(&x, &g, 1e-5, &mut out).unwrap_err();
    assert!(
        matches!(e, TensorError::ShapeMismatch { op: "rms_norm", .. }),
        "{e}"
    );
    let mut out = c.output(&[2, 4], DType::F64)?;
    let e = c.rms_norm_into(&x, &g, 1e-5, &mut out).unwrap_err();
    assert!(
        matches!(e, TensorError::DTypeMismatch { op: "rms_norm", .. }),
        "{e}"
    );

    // Strided.
    let wide = c.output(&[4, 2], DType::F32)?;
    let mut strided = wide.t()?;
    let e = c.rms_norm_into(&x, &g, 1e-5, &mut strided).unwrap_err();
    assert!(message(e).contains("contiguous"));

    // Shared by another tensor: nothing is written.
    let mut shared = c.zeros(&[2, 4], DType::F32)?;
    let other = shared.clone();
    let e = c.rms_norm_into(&x, &g, 1e-5, &mut shared).unwrap_err();
    assert!(message(e).contains("shared by 2 tensors"));
    assert_eq!(values(&other), [0.0; 8]);
    drop(other);
    c.rms_norm_into(&x, &g, 1e-5, &mut shared)?;

    // Read-only storage (static bytes, 64-byte aligned so they stay zero-copy).
    #[repr(C, align(64))]
    struct Aligned([u8; 32]);
    static BYTES: Aligned = Aligned([0; 32]);
    let storage = tempra_tensor::Storage::from_static(&BYTES.0)?;
    let layout =
        tempra_tensor::Layout::contiguous(tempra_tensor::Shape::new(&[2, 4])?, DType::F32)?;
    let mut fixed = Tensor::from_storage(storage, layout)?;
    assert!(matches!(fixed.storage(), tempra_tensor::Storage::Static(_)));
    let e = c.rms_norm_into(&x, &g, 1e-5, &mut fixed).unwrap_err();
    assert!(message(e).contains("read-only"));

    // Too few values for the output.
    let mut ids = c.output(&[3], DType::U32)?;
    let e = c.write_from_slice(&[1u32, 2], &mut ids).unwrap_err();
    assert!(matches!(e, TensorError::DataLength { .. }), "{e}");
    Ok(())
}

#[test]
fn set_view_points_one_handle_at_a_region_inside_its_storage() -> Result<(), TensorError> {
    let c = ctx();
    let mut t = c.zeros_persistent(&[4, 8], DType::F32)?;
    t.set_view(8, &[2, 8])?;
    assert_eq!((t.dims(), t.layout().offset()), (&[2usize, 8][..], 8));
    c.fill(&mut t, 3.0)?;
    t.set_view(0, &[4, 8])?;
    let v = values(&t);
    assert!(v[..8].iter().all(|&x| x == 0.0) && v[8..24].iter().all(|&x| x == 3.0));
    assert!(v[24..].iter().all(|&x| x == 0.0));
    let e = t.set_view(8, &[4, 8]).unwrap_err();
    assert!(e.to_string().contains("spans"), "{e}");
    Ok(())
}
