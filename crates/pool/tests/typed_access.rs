//! Typed access to host leases: any `Pod` view of the same bytes, zeroed fresh blocks,
//! 64-byte alignment.

use bytemuck::{Pod, Zeroable};
use tempra_pool::{BufferPool, HOST_ALIGN};

/// A cache line as one value: the strictest alignment a host block supports.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(64))]
struct Line([u8; 64]);

#[test]
fn f32_values_read_back_as_bytes_and_narrower_words() {
    let pool = BufferPool::host();
    let mut lease = pool.acquire(1000 * 4 + 3).unwrap(); // 3 trailing bytes
    let values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.25).collect();
    let floats = lease.as_mut_slice::<f32>();
    assert_eq!(
        floats.len(),
        1000,
        "trailing bytes that do not fill an f32 are left out"
    );
    floats.copy_from_slice(&values);

    let bytes = lease.as_slice::<u8>();
    assert_eq!(bytes.len(), 4003);
    for (chunk, v) in bytes.chunks_exact(4).zip(&values) {
        assert_eq!(chunk, v.to_le_bytes());
    }
    let words = lease.as_slice::<u32>();
    assert_eq!(words.len(), 1000);
    assert!(words.iter().zip(&values).all(|(&w, v)| w == v.to_bits()));
    let halves = lease.as_slice::<u16>();
    assert_eq!(halves.len(), 2001);
    for (pair, v) in halves.chunks_exact(2).zip(&values) {
        let bits = v.to_bits();
        assert_eq!(pair, [bits as u16, (bits >> 16) as u16]);
    }
    // A 34-byte block type (like a Q8_0 block): 4003 / 34 = 117 whole blocks.
    let blocks = lease.as_slice::<[u8; 34]>();
    assert_eq!(blocks.len(), 117);
    for (k, block) in blocks.iter().enumerate() {
        assert_eq!(&block[..], &lease.as_bytes()[34 * k..34 * (k + 1)]);
    }

    // And back: writing u16 halves changes the f32 view.
    lease.as_mut_slice::<u16>()[1] = 0x3F80; // high half of 1.0f32; low half of 0.0 ...
    lease.as_mut_slice::<u16>()[0] = 0;
    assert_eq!(lease.as_slice::<f32>()[0], 1.0);
}

#[test]
fn fresh_host_blocks_are_zeroed() {
    for bytes in [1, 64, 1000, 32 << 10, 100_000, 4 << 20, 16 << 20] {
        let pool = BufferPool::host();
        let lease = pool.acquire(bytes).unwrap();
        assert!(
            lease.as_bytes().iter().all(|&b| b == 0),
            "{bytes}-byte block not zeroed"
        );
        assert!(lease.as_slice::<u64>().iter().all(|&w| w == 0));
    }
}

#[test]
fn recycled_blocks_keep_their_old_contents() {
    // Only *fresh* blocks are zeroed: a hit hands back the bytes the last user left.
    let pool = BufferPool::host();
    let mut lease = pool.acquire(256).unwrap();
    lease.as_bytes_mut().fill(0xAB);
    drop(lease);
    let again = pool.acquire(200).unwrap();
    assert_eq!(pool.stats().hits, 1);
    assert!(again.as_bytes().iter().all(|&b| b == 0xAB));
}

#[test]
fn host_blocks_are_64_byte_aligned() {
    assert_eq!(HOST_ALIGN, 64);
    let pool = BufferPool::host();
    let mut held = Vec::new();
    for bytes in [
        0,
        1,
        3,
        63,
        64,
        65,
        100,
        4095,
        4097,
        50_000,
        1 << 20,
        (1 << 20) + 7,
    ] {
        let mut lease = pool.acquire(bytes).unwrap();
        assert_eq!(lease.as_ptr() as usize % 64, 0, "{bytes}-byte lease");
        assert_eq!(lease.block().as_ptr(), lease.as_ptr());
        assert_eq!(lease.block().size(), lease.capacity());
        let lines = lease.as_mut_slice::<Line>();
        assert_eq!(lines.len(), bytes / 64);
        if let Some(line) = lines.last_mut() {
            line.0[63] = 1;
        }
        held.push(lease);
    }
}
