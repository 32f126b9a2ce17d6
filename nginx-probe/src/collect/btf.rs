//! A small reader of the kernel's BTF (`/sys/kernel/btf/vmlinux`): byte offsets of
//! struct members, which the eBPF programs need to walk a worker's fd table at the
//! moment of a write (see `nginx_probe_common::off`) and to read a socket in the
//! lifecycle's raw tracepoints (`nginx_probe_common::lifecycle::raw_off`).
//!
//! Only what that needs is parsed: the header, the type section (every kind is sized so
//! it can be skipped) and the string section. aya-obj parses BTF too but keeps member
//! offsets private. Format: <https://docs.kernel.org/bpf/btf.html>.

use std::collections::HashMap;

use nginx_probe_common::{OFF_COUNT, OFF_PATHS};

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_TYPE_TAG: u32 = 18;

/// One struct or union member: name, type id, offset in bits, and whether it is a
/// bitfield.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    type_id: u32,
    bit_offset: u32,
    bitfield: bool,
}

/// What is kept of a type: its kind, name, referenced type and, for structs and
/// unions, members.
#[derive(Clone, Debug, Default)]
struct Type {
    kind: u32,
    name: String,
    /// Referenced type (typedef, const, volatile...).
    type_ref: u32,
    members: Vec<Member>,
}

/// Parsed BTF: types by id (id 0 is `void`) and named structs by name.
#[derive(Debug)]
pub struct Btf {
    types: Vec<Type>,
    structs: HashMap<String, u32>,
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, String> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| format!("BTF truncated at byte {at}"))
}

impl Btf {
    /// Parses a little-endian BTF blob.
    ///
    /// Errors: bad magic, truncated sections or an unknown type kind, in one line.
    pub fn parse(b: &[u8]) -> Result<Btf, String> {
        if b.len() < 24 || u16::from_le_bytes([b[0], b[1]]) != BTF_MAGIC {
            return Err("not little-endian BTF (bad magic)".into());
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let type_off = u32_at(b, 8)? as usize;
        let type_len = u32_at(b, 12)? as usize;
        let str_off = u32_at(b, 16)? as usize;
        let str_len = u32_at(b, 20)? as usize;
        let types_sec = b
            .get(hdr_len + type_off..hdr_len + type_off + type_len)
            .ok_or("BTF type section out of bounds")?;
        let strs = b
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or("BTF string section out of bounds")?;
        let name = |off: u32| -> String {
            let Some(s) = strs.get(off as usize..) else {
                return String::new();
            };
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        };
        let mut types = vec![Type::default()];
        let mut structs = HashMap::new();
        let mut at = 0usize;
        while at < types_sec.len() {
            let name_off = u32_at(types_sec, at)?;
            let info = u32_at(types_sec, at + 4)?;
            let size_or_type = u32_at(types_sec, at + 8)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            at += 12;
            let mut t = Type {
                kind,
                name: name(name_off),
                type_ref: size_or_type,
                members: Vec::new(),
            };
            let extra = match kind {
                0 | 2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
                1 | 14 | 17 => 4,
                3 => 12,
                KIND_STRUCT | KIND_UNION => {
                    for m in 0..vlen {
                        let p = at + m * 12;
                        let off = u32_at(types_sec, p + 8)?;
                        t.members.push(Member {
                            name: name(u32_at(types_sec, p)?),
                            type_id: u32_at(types_sec, p + 4)?,
                            bit_offset: if kind_flag { off & 0xff_ffff } else { off },
                            bitfield: kind_flag && off >> 24 != 0,
                        });
                    }
                    vlen * 12
                }
                6 | 13 => vlen * 8,
                15 | 19 => vlen * 12,
                k => return Err(format!("unknown BTF kind {k}")),
            };
            at += extra;
            if kind == KIND_STRUCT && !t.name.is_empty() {
                structs.entry(t.name.clone()).or_insert(types.len() as u32);
            }
            types.push(t);
        }
        Ok(Btf { types, structs })
    }

    /// The kernel's BTF (`/sys/kernel/btf/vmlinux`).
    ///
    /// Errors: unreadable (a kernel without CONFIG_DEBUG_INFO_BTF) or unparsable.
    pub fn from_kernel() -> Result<Btf, String> {
        let b = std::fs::read("/sys/kernel/btf/vmlinux")
            .map_err(|e| format!("/sys/kernel/btf/vmlinux: {e}"))?;
        Btf::parse(&b)
    }

    /// Follows typedefs and qualifiers to the underlying type id.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.types.get(id as usize) {
                Some(t)
                    if matches!(
                        t.kind,
                        KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG
                    ) =>
                {
                    id = t.type_ref
                }
                _ => break,
            }
        }
        id
    }

    /// Bit offset of member `name` in struct/union `id`, looking into anonymous
    /// members; with the member's type id and whether it is a bitfield.
    fn find_member(&self, id: u32, name: &str, depth: u32) -> Option<(u32, u32, bool)> {
        if depth > 8 {
            return None;
        }
        let t = self.types.get(self.resolve(id) as usize)?;
        for m in &t.members {
            if m.name == name {
                return Some((m.bit_offset, m.type_id, m.bitfield));
            }
        }
        for m in t.members.iter().filter(|m| m.name.is_empty()) {
            if let Some((off, ty, bf)) = self.find_member(m.type_id, name, depth + 1) {
                return Some((m.bit_offset + off, ty, bf));
            }
        }
        None
    }

    /// Byte offset of `path` (members separated by `.`, e.g.
    /// `__sk_common.skc_num`) in struct `strukt`; None when the struct or a member is
    /// missing, or the member is a bitfield or not byte-aligned.
    pub fn member_offset(&self, strukt: &str, path: &str) -> Option<u64> {
        let mut id = *self.structs.get(strukt)?;
        let mut bits: u64 = 0;
        let mut bitfield = false;
        for part in path.split('.') {
            let (off, ty, bf) = self.find_member(id, part, 0)?;
            bits += off as u64;
            id = ty;
            bitfield = bf;
        }
        (!bitfield && bits.is_multiple_of(8)).then_some(bits / 8)
    }
}

/// The offsets of `nginx_probe_common::OFF_PATHS` in `btf`, or the first missing one's
/// `struct.member` name.
pub fn kernel_offsets(btf: &Btf) -> Result<[u64; OFF_COUNT], String> {
    offsets_of(btf, &OFF_PATHS)
}

/// The byte offsets of `paths` ((struct, member path) each) in `btf`, in order, or why
/// not: the first one missing (or a bitfield), as `struct.member`.
pub fn offsets_of<const N: usize>(
    btf: &Btf,
    paths: &[(&str, &str); N],
) -> Result<[u64; N], String> {
    let mut out = [u64::MAX; N];
    for (i, (s, m)) in paths.iter().enumerate() {
        out[i] = btf
            .member_offset(s, m)
            .ok_or_else(|| format!("{s}.{m} not in the kernel's BTF (or a bitfield)"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a BTF blob: `types` are raw type-section words, `strs` the string section.
    fn blob(types: &[u32], strs: &[u8]) -> Vec<u8> {
        let tbytes: Vec<u8> = types.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut b = Vec::new();
        b.extend_from_slice(&BTF_MAGIC.to_le_bytes());
        b.push(1); // version
        b.push(0); // flags
        for w in [
            24u32,
            0,
            tbytes.len() as u32,
            tbytes.len() as u32,
            strs.len() as u32,
        ] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&tbytes);
        b.extend_from_slice(strs);
        b
    }

    #[test]
    fn offsets_through_anonymous_unions_typedefs_and_nested_structs() {
        // Strings: 1 "int", 5 "inner", 11 "a", 13 "b", 15 "outer", 21 "x", 23 "in", 26 "t"
        let strs = b"\0int\0inner\0a\0b\0outer\0x\0in\0t\0";
        let info = |kind: u32, vlen: u32, kflag: bool| (kind << 24) | vlen | ((kflag as u32) << 31);
        let types = [
            // 1: int, 4 bytes
            1,
            info(1, 0, false),
            4,
            0x20,
            // 2: struct inner { int a @0; int b @32 bits }
            5,
            info(4, 2, false),
            8,
            11,
            1,
            0,
            13,
            1,
            32,
            // 3: typedef t -> 2
            26,
            info(8, 0, false),
            2,
            // 4: anonymous union { int x @0 } (kind_flag: bitfield size in top 8 bits)
            0,
            info(5, 1, true),
            4,
            21,
            1,
            0,
            // 5: struct outer { int a @0; union (anon) @64; t in @128 }
            15,
            info(4, 3, false),
            24,
            11,
            1,
            0,
            0,
            4,
            64,
            23,
            3,
            128,
            // 6: a kind this reader only skips (ENUM with 2 values)
            0,
            info(6, 2, false),
            4,
            11,
            0,
            13,
            1,
        ];
        let btf = Btf::parse(&blob(&types, strs)).unwrap();
        assert_eq!(btf.member_offset("outer", "a"), Some(0));
        assert_eq!(btf.member_offset("outer", "x"), Some(8), "anonymous union");
        assert_eq!(
            btf.member_offset("outer", "in.b"),
            Some(20),
            "through a typedef"
        );
        assert_eq!(btf.member_offset("inner", "b"), Some(4));
        assert_eq!(btf.member_offset("outer", "nope"), None);
        assert_eq!(btf.member_offset("nope", "a"), None);
        assert!(kernel_offsets(&btf).is_err());
    }

    #[test]
    fn a_bitfield_has_no_byte_offset() {
        // Strings: 1 "int", 5 "s", 7 "p", 9 "q"
        let strs = b"\0int\0s\0p\0q\0";
        let types = [
            1,
            0x0100_0000,
            4,
            0x20,
            // 2: struct s (kind_flag) { int p: 8 @8 bits; int q @32 bits }
            5,
            (4 << 24) | 2 | (1 << 31),
            8,
            7,
            1,
            (8 << 24) | 8,
            9,
            1,
            32,
        ];
        let btf = Btf::parse(&blob(&types, strs)).unwrap();
        assert_eq!(btf.member_offset("s", "p"), None, "bitfield");
        assert_eq!(btf.member_offset("s", "q"), Some(4));
        assert!(offsets_of(&btf, &[("s", "q"), ("s", "p")]).is_err());
        assert_eq!(offsets_of(&btf, &[("s", "q")]), Ok([4]));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Btf::parse(b"").is_err());
        assert!(Btf::parse(&[0u8; 64]).is_err());
        let mut b = blob(&[1, 0x0100_0000, 4, 0x20], b"\0int\0");
        b.truncate(b.len() - 8);
        assert!(Btf::parse(&b).is_err());
        // Unknown kind 31.
        assert!(Btf::parse(&blob(&[0, 31 << 24, 0], b"\0")).is_err());
    }

    #[test]
    fn this_kernel_has_every_offset() {
        // Machines without BTF skip; where it exists, the fd walk must be possible.
        let Ok(btf) = Btf::from_kernel() else {
            return;
        };
        let raw = offsets_of(&btf, &nginx_probe_common::lifecycle::RAW_OFF_PATHS);
        assert!(raw.is_ok(), "lifecycle raw-tracepoint offsets: {raw:?}");
        let offs = kernel_offsets(&btf).expect("offsets");
        // fdtable.max_fds is its first member on every kernel since 2.6.
        assert_eq!(offs[nginx_probe_common::off::FDT_MAX_FDS], 0);
        assert!(offs.iter().all(|&o| o < 8192), "{offs:?}");
    }
}
