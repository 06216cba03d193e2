//! The route hash of several candidates at once.
//!
//! A new route hashes every candidate that ties on everything before the
//! hash (ROUTE-10). MD5's rounds are one long chain of dependent
//! additions, so one digest leaves most of a core's arithmetic units
//! idle. Here up to [`LANES`] single-block messages run side by side,
//! each step of the chain done for every lane before the next step: the
//! lanes' chains are independent, so the processor overlaps their
//! instructions (on a baseline x86-64 target the compiler emits them as
//! interleaved scalar instructions). The digest of each lane is MD5's
//! (RFC 1321), as [`super::route_hash_key`] computes it alone.

use super::MD5_INIT;

/// Messages hashed side by side.
pub(super) const LANES: usize = 8;

/// The longest MD5 input that fits one 64-byte block with its padding
/// (the end marker and the 8-byte length).
pub(super) const ONE_BLOCK_INPUT_MAX: usize = 64 - 9;

/// MD5's additive constants, `floor(abs(sin(i + 1)) * 2^32)` (RFC 1321,
/// 3.4).
#[rustfmt::skip]
const K: [u32; 64] = [
    0xd76a_a478, 0xe8c7_b756, 0x2420_70db, 0xc1bd_ceee,
    0xf57c_0faf, 0x4787_c62a, 0xa830_4613, 0xfd46_9501,
    0x6980_98d8, 0x8b44_f7af, 0xffff_5bb1, 0x895c_d7be,
    0x6b90_1122, 0xfd98_7193, 0xa679_438e, 0x49b4_0821,
    0xf61e_2562, 0xc040_b340, 0x265e_5a51, 0xe9b6_c7aa,
    0xd62f_105d, 0x0244_1453, 0xd8a1_e681, 0xe7d3_fbc8,
    0x21e1_cde6, 0xc337_07d6, 0xf4d5_0d87, 0x455a_14ed,
    0xa9e3_e905, 0xfcef_a3f8, 0x676f_02d9, 0x8d2a_4c8a,
    0xfffa_3942, 0x8771_f681, 0x6d9d_6122, 0xfde5_380c,
    0xa4be_ea44, 0x4bde_cfa9, 0xf6bb_4b60, 0xbebf_bc70,
    0x289b_7ec6, 0xeaa1_27fa, 0xd4ef_3085, 0x0488_1d05,
    0xd9d4_d039, 0xe6db_99e5, 0x1fa2_7cf8, 0xc4ac_5665,
    0xf429_2244, 0x432a_ff97, 0xab94_23a7, 0xfc93_a039,
    0x655b_59c3, 0x8f0c_cc92, 0xffef_f47d, 0x8584_5dd1,
    0x6fa8_7e4f, 0xfe2c_e6e0, 0xa301_4314, 0x4e08_11a1,
    0xf753_7e82, 0xbd3a_f235, 0x2ad7_d2bb, 0xeb86_d391,
];

/// One lane's message: a single block, padded.
pub(super) type Block = [u8; 64];

/// Pads `action || "/" || replica` into `block` (RFC 1321, 3.1 and 3.2);
/// false, leaving `block` as it was, when the input needs a second block.
pub(super) fn pad_one_block(block: &mut Block, action: &[u8], replica: &[u8]) -> bool {
    let len = action.len() + 1 + replica.len();
    if len > ONE_BLOCK_INPUT_MAX {
        return false;
    }
    *block = [0; 64];
    block[..action.len()].copy_from_slice(action);
    block[action.len()] = b'/';
    block[action.len() + 1..len].copy_from_slice(replica);
    block[len] = 0x80;
    block[56..].copy_from_slice(&((len as u64) * 8).to_le_bytes());
    true
}

/// Round 1's function, for every lane.
#[inline(always)]
fn f<const L: usize>(x: &[u32; L], y: &[u32; L], z: &[u32; L]) -> [u32; L] {
    let mut out = [0; L];
    for l in 0..L {
        out[l] = (x[l] & y[l]) | (!x[l] & z[l]);
    }
    out
}

/// Round 2's function.
#[inline(always)]
fn g<const L: usize>(x: &[u32; L], y: &[u32; L], z: &[u32; L]) -> [u32; L] {
    let mut out = [0; L];
    for l in 0..L {
        out[l] = (x[l] & z[l]) | (y[l] & !z[l]);
    }
    out
}

/// Round 3's function.
#[inline(always)]
fn h<const L: usize>(x: &[u32; L], y: &[u32; L], z: &[u32; L]) -> [u32; L] {
    let mut out = [0; L];
    for l in 0..L {
        out[l] = x[l] ^ y[l] ^ z[l];
    }
    out
}

/// Round 4's function.
#[inline(always)]
fn i<const L: usize>(x: &[u32; L], y: &[u32; L], z: &[u32; L]) -> [u32; L] {
    let mut out = [0; L];
    for l in 0..L {
        out[l] = y[l] ^ (x[l] | !z[l]);
    }
    out
}

/// One MD5 step for every lane: `a = b + ((a + fun(b, c, d) + k + m) <<< s)`.
macro_rules! step {
    ($fun:ident, $a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:expr) => {
        let t = $fun(&$b, &$c, &$d);
        for l in 0..$a.len() {
            $a[l] = $b[l].wrapping_add(
                $a[l]
                    .wrapping_add(t[l])
                    .wrapping_add($k)
                    .wrapping_add($m[l])
                    .rotate_left($s),
            );
        }
    };
}

/// The route hash keys of `blocks` (each from [`pad_one_block`]): the
/// first 8 bytes of each digest, big-endian. `L` is at most [`LANES`].
pub(super) fn hash_blocks<const L: usize>(blocks: &[Block; L]) -> [u64; L] {
    let mut m = [[0u32; L]; 16];
    for (w, words) in m.iter_mut().enumerate() {
        for (l, block) in blocks.iter().enumerate() {
            words[l] = u32::from_le_bytes([
                block[4 * w],
                block[4 * w + 1],
                block[4 * w + 2],
                block[4 * w + 3],
            ]);
        }
    }
    let [a0, b0, c0, d0] = MD5_INIT;
    let (mut a, mut b, mut c, mut d) = ([a0; L], [b0; L], [c0; L], [d0; L]);
    // The 64 steps of RFC 1321, 3.4: each names its round's function,
    // the registers in their turn, the message word, the constant and
    // the rotation.
    // Round 1.
    step!(f, a, b, c, d, m[0], K[0], 7);
    step!(f, d, a, b, c, m[1], K[1], 12);
    step!(f, c, d, a, b, m[2], K[2], 17);
    step!(f, b, c, d, a, m[3], K[3], 22);
    step!(f, a, b, c, d, m[4], K[4], 7);
    step!(f, d, a, b, c, m[5], K[5], 12);
    step!(f, c, d, a, b, m[6], K[6], 17);
    step!(f, b, c, d, a, m[7], K[7], 22);
    step!(f, a, b, c, d, m[8], K[8], 7);
    step!(f, d, a, b, c, m[9], K[9], 12);
    step!(f, c, d, a, b, m[10], K[10], 17);
    step!(f, b, c, d, a, m[11], K[11], 22);
    step!(f, a, b, c, d, m[12], K[12], 7);
    step!(f, d, a, b, c, m[13], K[13], 12);
    step!(f, c, d, a, b, m[14], K[14], 17);
    step!(f, b, c, d, a, m[15], K[15], 22);
    // Round 2.
    step!(g, a, b, c, d, m[1], K[16], 5);
    step!(g, d, a, b, c, m[6], K[17], 9);
    step!(g, c, d, a, b, m[11], K[18], 14);
    step!(g, b, c, d, a, m[0], K[19], 20);
    step!(g, a, b, c, d, m[5], K[20], 5);
    step!(g, d, a, b, c, m[10], K[21], 9);
    step!(g, c, d, a, b, m[15], K[22], 14);
    step!(g, b, c, d, a, m[4], K[23], 20);
    step!(g, a, b, c, d, m[9], K[24], 5);
    step!(g, d, a, b, c, m[14], K[25], 9);
    step!(g, c, d, a, b, m[3], K[26], 14);
    step!(g, b, c, d, a, m[8], K[27], 20);
    step!(g, a, b, c, d, m[13], K[28], 5);
    step!(g, d, a, b, c, m[2], K[29], 9);
    step!(g, c, d, a, b, m[7], K[30], 14);
    step!(g, b, c, d, a, m[12], K[31], 20);
    // Round 3.
    step!(h, a, b, c, d, m[5], K[32], 4);
    step!(h, d, a, b, c, m[8], K[33], 11);
    step!(h, c, d, a, b, m[11], K[34], 16);
    step!(h, b, c, d, a, m[14], K[35], 23);
    step!(h, a, b, c, d, m[1], K[36], 4);
    step!(h, d, a, b, c, m[4], K[37], 11);
    step!(h, c, d, a, b, m[7], K[38], 16);
    step!(h, b, c, d, a, m[10], K[39], 23);
    step!(h, a, b, c, d, m[13], K[40], 4);
    step!(h, d, a, b, c, m[0], K[41], 11);
    step!(h, c, d, a, b, m[3], K[42], 16);
    step!(h, b, c, d, a, m[6], K[43], 23);
    step!(h, a, b, c, d, m[9], K[44], 4);
    step!(h, d, a, b, c, m[12], K[45], 11);
    step!(h, c, d, a, b, m[15], K[46], 16);
    step!(h, b, c, d, a, m[2], K[47], 23);
    // Round 4.
    step!(i, a, b, c, d, m[0], K[48], 6);
    step!(i, d, a, b, c, m[7], K[49], 10);
    step!(i, c, d, a, b, m[14], K[50], 15);
    step!(i, b, c, d, a, m[5], K[51], 21);
    step!(i, a, b, c, d, m[12], K[52], 6);
    step!(i, d, a, b, c, m[3], K[53], 10);
    step!(i, c, d, a, b, m[10], K[54], 15);
    step!(i, b, c, d, a, m[1], K[55], 21);
    step!(i, a, b, c, d, m[8], K[56], 6);
    step!(i, d, a, b, c, m[15], K[57], 10);
    step!(i, c, d, a, b, m[6], K[58], 15);
    step!(i, b, c, d, a, m[13], K[59], 21);
    step!(i, a, b, c, d, m[4], K[60], 6);
    step!(i, d, a, b, c, m[11], K[61], 10);
    step!(i, c, d, a, b, m[2], K[62], 15);
    step!(i, b, c, d, a, m[9], K[63], 21);
    // The digest is the state after adding the initial one, each word
    // little-endian; its first 8 bytes are words a and b.
    let mut keys = [0; L];
    for l in 0..L {
        let (a, b) = (a[l].wrapping_add(a0), b[l].wrapping_add(b0));
        keys[l] = (u64::from(a.swap_bytes()) << 32) | u64::from(b.swap_bytes());
    }
    keys
}
