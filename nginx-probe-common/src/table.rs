//! The macros that declare an indexed table once: each entry's index constant, the
//! number of entries and the table indexed by them come from one list, so adding an
//! entry cannot leave an index, a count or a name behind. They expand to plain
//! `const` items and work under `no_std` (the BPF target).

/// Declares `pub mod $module` with one index constant per entry (0, 1, 2... in list
/// order, of type `$ty`), `pub const $count: usize` (the number of entries) and
/// `pub const $table: [$elem; $count]` (each entry's value at its index).
///
/// ```ignore
/// indexed! {
///     /// Module doc.
///     pub mod kind: u32;
///     /// Count doc.
///     pub const KIND_COUNT;
///     /// Table doc.
///     pub const KIND_NAMES: [&str];
///     /// Entry doc.
///     A => "a",
///     /// Entry doc.
///     B => "b",
/// }
/// ```
macro_rules! indexed {
    (
        $(#[$module_meta:meta])*
        pub mod $module:ident: $ty:ty;
        $(#[$count_meta:meta])*
        pub const $count:ident;
        $(#[$table_meta:meta])*
        pub const $table:ident: [$elem:ty];
        $( $(#[$entry_meta:meta])* $name:ident => $value:expr, )+
    ) => {
        $(#[$module_meta])*
        pub mod $module {
            /// The entries in list order: their discriminants are the indexes.
            #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
            enum Index {
                $( $name, )+
            }
            $( $(#[$entry_meta])* pub const $name: $ty = Index::$name as $ty; )+
        }
        $(#[$count_meta])*
        pub const $count: usize = [$(stringify!($name)),+].len();
        $(#[$table_meta])*
        pub const $table: [$elem; $count] = [$($value),+];
    };
}

/// Declares a fieldless `#[repr(u32)]` enum (discriminants 0, 1, 2... in list order),
/// `pub const $count: usize` (the number of variants) and
/// `pub const $names: [&str; $count]` (each variant's name, indexed by `variant as
/// usize`).
macro_rules! named_enum {
    (
        $(#[$enum_meta:meta])*
        pub enum $enum:ident;
        $(#[$count_meta:meta])*
        pub const $count:ident;
        $(#[$names_meta:meta])*
        pub const $names:ident;
        $( $(#[$variant_meta:meta])* $variant:ident => $text:literal, )+
    ) => {
        $(#[$enum_meta])*
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $enum {
            $( $(#[$variant_meta])* $variant, )+
        }
        $(#[$count_meta])*
        pub const $count: usize = [$($text),+].len();
        $(#[$names_meta])*
        pub const $names: [&str; $count] = [$($text),+];
    };
}

/// Declares one `pub const NAME: &str` per entry and `pub const $all: &[&str]` listing
/// them all, for names that cross the kernel boundary (maps, programs, globals): the
/// object contract test compares the object with the `ALL` lists.
macro_rules! names {
    (
        $(#[$all_meta:meta])*
        pub const $all:ident;
        $( $(#[$entry_meta:meta])* $name:ident = $text:literal, )+
    ) => {
        $( $(#[$entry_meta])* pub const $name: &str = $text; )+
        $(#[$all_meta])*
        pub const $all: &[&str] = &[$($name),+];
    };
}
