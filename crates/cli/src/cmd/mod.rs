//! One module per verb: argument structs and the printing of results.

pub mod agent;
pub mod apply;
pub mod check;
pub mod compare;
pub mod generate;
pub mod install;
pub mod load;
pub mod measure;
pub mod reserved;
pub mod run;
pub mod shield;
pub mod thread_demo;
pub mod tune;
pub mod vm;
