/**
 * The test harness later tests reuse: root handling, namespace topologies, throwaway Redis.
 *
 * @module
 */
export * from "./root.ts";
export * from "./netns.ts";
export * from "./redis.ts";
