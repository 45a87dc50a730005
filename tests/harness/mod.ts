/**
 * Test machinery only: root handling (skip on a laptop, fail in CI). What tests run against — the
 * namespace topologies, the throwaway redis-server, the virtual cluster — is the lab (`lab/`).
 *
 * @module
 */
export * from "./root.ts";
export * from "./until.ts";
