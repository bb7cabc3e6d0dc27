import type Docker from 'dockerode';
import type { PlannedMount, RunPlan } from '../../plan/run-plan.js';

/** A RunPlan as Engine API create options (pure): the Docker launcher's translation, checked as data by tests. */

/** Engine API mount (the typings lag the API: tmpfs has no Source, binds have NonRecursive). */
export type EngineMount =
  | { Type: 'tmpfs'; Target: string; ReadOnly: boolean; TmpfsOptions: { SizeBytes: number; Mode: number } }
  | { Type: 'bind'; Source: string; Target: string; ReadOnly: boolean; BindOptions: { NonRecursive: boolean } };

export function toEngineMount(m: PlannedMount): EngineMount {
  if (m.type === 'tmpfs') {
    return { Type: 'tmpfs', Target: m.target, ReadOnly: m.readOnly, TmpfsOptions: { SizeBytes: m.sizeBytes, Mode: m.mode } };
  }
  // Typed binds refuse a missing source instead of creating it as root (Binds strings would).
  // NonRecursive: host submounts under a source are not carried in, so nothing below a
  // read-only bind can be a writable mount (recursive read-only needs API 1.44).
  return { Type: 'bind', Source: m.source, Target: m.target, ReadOnly: m.readOnly, BindOptions: { NonRecursive: true } };
}

export function toEnv(plan: RunPlan): string[] {
  return Object.entries(plan.env).map(([k, v]) => `${k}=${v}`);
}

/**
 * Engine API options for a plan; exported so tests can check the translation as data. `cmd`
 * replaces the plan's argv (a warm container's keep-alive), nothing else; `reports` opens the
 * keep-alive's stdin to berth's attach (docker/reports.ts).
 */
export function toCreateOptions(plan: RunPlan, name?: string, cmd: string[] = plan.argv, reports = false): Docker.ContainerCreateOptions {
  return {
    name,
    Image: plan.image,
    Cmd: cmd,
    Entrypoint: [],
    WorkingDir: plan.cwd,
    User: plan.user,
    Env: toEnv(plan),
    Labels: plan.labels,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: reports,
    OpenStdin: reports,
    StdinOnce: false,
    Tty: false,
    StopTimeout: 1,
    HostConfig: {
      Mounts: plan.mounts.map(toEngineMount) as unknown as Docker.MountConfig,
      NetworkMode: plan.network,
      Runtime: plan.runtime,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: plan.readOnlyRootfs,
      Memory: plan.limits.memoryBytes,
      MemorySwap: plan.limits.memoryBytes,
      NanoCpus: plan.limits.nanoCpus,
      PidsLimit: plan.limits.pids,
      IpcMode: 'private',
      // Scoped to that private IPC namespace (run-plan.ts IPC_SYSCTLS).
      Sysctls: { ...plan.sysctls },
      // No single file grows past what the workspace may hold: the kernel refuses the write (EFBIG / SIGXFSZ).
      ...(plan.limits.diskBytes ? { Ulimits: [{ Name: 'fsize', Soft: plan.limits.diskBytes, Hard: plan.limits.diskBytes }] } : {}),
      // The engine keeps no copy of the output: berth reads it once, bounded, from attach.
      LogConfig: { Type: 'none', Config: {} },
    },
  };
}
