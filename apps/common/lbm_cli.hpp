// The model flags ordo-lbm and its OpenMP baseline share (--iters, --tol, --omega, --lid), so
// that both read one problem the same way.
#pragma once

#include <cstdint>
#include <string>

#include "app_cli.hpp"
#include "lbm.hpp"

namespace ordo::app::lbm {

// Declares the flags into p and iters; returns --tol's option (given: count() > 0).
inline CLI::Option* add_model_flags(CLI::App& cli, Problem& p, std::uint64_t& iters) {
  cli.add_option("--iters", iters, "time steps, an even number (with --tol: the most)")
      ->check(ordo::cli::Integer(2, max_iters))
      ->capture_default_str();
  CLI::Option* tol = cli.add_option("--tol", p.tol,
                                    "stop after the first pair of steps whose second changes no "
                                    "velocity component by more than T")
                         ->check(ordo::cli::Real(0, 1e300));
  cli.add_option("--omega", p.omega, "BGK relaxation rate, in (0, 2)")
      ->check(ordo::cli::Real(1e-6, 1.999999))
      ->capture_default_str();
  cli.add_option("--lid", p.lid, "lid velocity, lattice units (|lid| below 0.3)")
      ->check(ordo::cli::Real(-0.3, 0.3))
      ->capture_default_str();
  return tol;
}

// After parsing: the steps (even: the pipeline runs them in pairs), the test (tol < 0: none).
inline void finish_model_flags(Problem& p, std::uint64_t iters, const CLI::Option* tol) {
  if (iters % 2 != 0)
    throw Error("--iters " + std::to_string(iters) +
                ": ordo-lbm runs its steps in pairs (f to g, then g to f); give an even number");
  if (tol->count() == 0) p.tol = -1;
  p.max_steps = iters;
}

}  // namespace ordo::app::lbm
