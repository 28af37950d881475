// Point updates shared by the ordo apps, their sequential references and the baselines
// (OpenMP, MPI), so that every version evaluates the same expression in the same order and
// results can be compared bit for bit.
#pragma once

#include <cstring>

namespace ordo::app {

// Eight doubles as one value (GCC vector extensions, so any -march builds it), for kernels
// that compute a row eight points at a time, and unaligned loads and stores of them.
using V8 = double __attribute__((vector_size(64)));
inline V8 load8(const double* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(double* p, V8 v) { std::memcpy(p, &v, sizeof v); }
// For a kernel's largest change (a max reduction): |v| and the larger of two, lane by lane,
// and the largest lane. A lane's -0 stays -0, which no max of values from 0 up returns.
inline V8 abs8(V8 v) { return v < 0 ? -v : v; }
inline V8 max8(V8 a, V8 b) { return a < b ? b : a; }
inline double max_lane(V8 v, double m) {
  for (int i = 0; i < 8; ++i) m = m < v[i] ? v[i] : m;
  return m;
}

// 2-D 5-point heat (Jacobi). Dirichlet boundary: the row above the grid (row -1) is held at
// kHeatTop, every other side at kHeatOther.
inline constexpr double kHeatTop = 1.0;
inline constexpr double kHeatOther = 0.0;

inline double heat2d_point(double c, double n, double s, double w, double e) {
  return c + 0.2 * ((n + s) + (w + e) - 4.0 * c);
}

// 3-D 7-point heat (Jacobi). Same boundary rule: the plane before the first one along the
// slowest dimension (i = -1) is held at kHeatTop, every other face at kHeatOther.
inline double heat3d_point(double c, double im, double ip, double jm, double jp, double km,
                           double kp) {
  return c + 0.125 * (((im + ip) + (jm + jp)) + (km + kp) - 6.0 * c);
}

}  // namespace ordo::app
