//! Stand-in for the CUDA backend in a build without the `cuda` feature: there is
//! never a GPU, and the device types have no values.

use super::ops::{Bin, Un};
use super::HostBuf;
use std::rc::Rc;

type R<T> = std::result::Result<T, String>;

/// A device buffer (none exist in this build).
pub enum DevBuf {}

/// The GPU (none exists in this build).
pub enum Gpu {}

pub fn gpu() -> Option<Rc<Gpu>> {
    None
}

pub fn available() -> bool {
    false
}

pub fn unavailable_reason() -> String {
    "this vlad was built without the `cuda` feature".into()
}

/// (No GPU: never an error of one.)
pub fn no_room(_e: &str) -> bool {
    false
}

pub fn to_host(d: &DevBuf, _n: usize) -> HostBuf {
    match *d {}
}

pub fn read_one(d: &DevBuf, _i: usize) -> f64 {
    match *d {}
}

#[allow(clippy::too_many_arguments)]
impl Gpu {
    pub fn upload(&self, _h: &[f64]) -> R<DevBuf> {
        match *self {}
    }
    pub fn zeros(&self, _n: usize) -> R<DevBuf> {
        match *self {}
    }
    pub fn fill(&self, _n: usize, _x: f64) -> R<DevBuf> {
        match *self {}
    }
    pub fn one_hot(&self, _n: usize, _i: usize, _x: f64) -> R<DevBuf> {
        match *self {}
    }
    pub fn unary(&self, _op: Un, _a: &DevBuf, _n: usize) -> R<DevBuf> {
        match *self {}
    }
    pub fn binary(&self, _op: Bin, _a: &DevBuf, _b: &DevBuf, _n: usize) -> R<DevBuf> {
        match *self {}
    }
    pub fn sum(&self, _a: &DevBuf, _n: usize) -> R<f64> {
        match *self {}
    }
    pub fn dot(&self, _a: &DevBuf, _b: &DevBuf, _n: usize) -> R<f64> {
        match *self {}
    }
    pub fn max(&self, _a: &DevBuf, _n: usize) -> R<(f64, usize)> {
        match *self {}
    }
    pub fn scan(&self, _a: &DevBuf, _n: usize, _reverse: bool) -> R<DevBuf> {
        match *self {}
    }
    pub fn mat_vec(&self, _a: &DevBuf, _x: &DevBuf, _r: usize, _c: usize) -> R<DevBuf> {
        match *self {}
    }
    pub fn vec_mat(&self, _x: &DevBuf, _a: &DevBuf, _r: usize, _c: usize) -> R<DevBuf> {
        match *self {}
    }
    pub fn mat_mat(&self, _a: &DevBuf, _b: &DevBuf, _r: usize, _k: usize, _c: usize) -> R<DevBuf> {
        match *self {}
    }
    pub fn transpose(&self, _a: &DevBuf, _r: usize, _c: usize) -> R<DevBuf> {
        match *self {}
    }
    pub fn outer(&self, _u: &DevBuf, _v: &DevBuf, _r: usize, _c: usize) -> R<DevBuf> {
        match *self {}
    }
}
