//! The command line: `resolve` and its subcommands (`cli`), `resolve check` (`check`), and
//! the owner's blocks (`blocks`).

pub mod blocks;
pub mod check;
pub mod cli;
