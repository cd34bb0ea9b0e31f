#pragma once
// All CPU reference kernels. Conventions: row-major buffers, N = B * T rows, shapes in the
// comments of each header. Forward kernels WRITE their outputs; backward kernels ADD into
// every gradient they produce (caller zeroes), except rope_backward (in place) and
// cross_entropy (writes dlogits). Input gradients (dx, not parameter gradients) can be
// WRITTEN instead with accumulate = false, which saves zeroing big buffers.
// Templated on T = float or double.
#include "zt/kernels/adamw.hpp"
#include "zt/kernels/attention.hpp"
#include "zt/kernels/cross_entropy.hpp"
#include "zt/kernels/embedding.hpp"
#include "zt/kernels/linear.hpp"
#include "zt/kernels/moe.hpp"
#include "zt/kernels/residual.hpp"
#include "zt/kernels/rmsnorm.hpp"
#include "zt/kernels/rope.hpp"
#include "zt/kernels/swiglu.hpp"
#include "zt/kernels/geglu.hpp"
#include "zt/kernels/softcap.hpp"
