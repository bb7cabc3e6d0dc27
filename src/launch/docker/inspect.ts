import Docker from 'dockerode';
import { translateEngineError } from './errors.js';

/**
 * What the engine says a container was created with, beside the launch Engine: thin, like
 * docker.ts. Field names are the Engine API's, so a difference is named as `docker inspect`
 * shows it; only the shapes are normalised (a missing list is empty, a missing number 0).
 */
export interface ContainerSettings {
  User: string;
  NetworkMode: string;
  ReadonlyRootfs: boolean;
  Privileged: boolean;
  CapAdd: string[];
  CapDrop: string[];
  SecurityOpt: string[];
  Memory: number;
  MemorySwap: number;
  NanoCpus: number;
  /** 0 or -1: no limit. */
  PidsLimit: number;
  /** "" (the engine's default) or "private": its own; "host" or "container:<id>": shared. */
  PidMode: string;
  IpcMode: string;
  /** Namespaced kernel settings. */
  Sysctls: Record<string, string>;
  /** The OCI runtime it runs under (runc, runsc, ...). */
  Runtime: string;
}

export interface ContainerInspector {
  inspect(containerId: string): Promise<ContainerSettings>;
}

/** The engine's inspect answer, in the shape berth compares. */
export function toContainerSettings(info: Pick<Docker.ContainerInspectInfo, 'Config' | 'HostConfig'>): ContainerSettings {
  const hc = (info.HostConfig ?? {}) as Docker.HostConfig & {
    NanoCpus?: number;
    PidsLimit?: number | null;
    Sysctls?: Record<string, string> | null;
  };
  return {
    User: info.Config?.User ?? '',
    NetworkMode: hc.NetworkMode ?? '',
    ReadonlyRootfs: hc.ReadonlyRootfs ?? false,
    Privileged: hc.Privileged ?? false,
    CapAdd: hc.CapAdd ?? [],
    CapDrop: hc.CapDrop ?? [],
    SecurityOpt: hc.SecurityOpt ?? [],
    Memory: hc.Memory ?? 0,
    MemorySwap: hc.MemorySwap ?? 0,
    NanoCpus: hc.NanoCpus ?? 0,
    PidsLimit: hc.PidsLimit ?? 0,
    PidMode: hc.PidMode ?? '',
    IpcMode: hc.IpcMode ?? '',
    Sysctls: hc.Sysctls ?? {},
    Runtime: (hc as { Runtime?: string }).Runtime ?? '',
  };
}

export function createContainerInspector(docker: Docker = new Docker()): ContainerInspector {
  return {
    async inspect(containerId) {
      try {
        return toContainerSettings(await docker.getContainer(containerId).inspect());
      } catch (err) {
        throw translateEngineError(err);
      }
    },
  };
}
