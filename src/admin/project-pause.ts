import type { Project } from '../store/projects.js';
import { clearPause, readPause, writePause, type Pause } from '../store/project-pause.js';

/** A project's pause as the admin surfaces show it (store/project-pause.ts keeps it). */
export interface PauseView {
  project: string;
  paused: boolean;
  since?: string;
  by?: string;
  reason?: string;
}

const viewOf = (project: string, pause: Pause | undefined): PauseView =>
  pause
    ? { project, paused: true, since: pause.at, by: pause.by, ...(pause.reason ? { reason: pause.reason } : {}) }
    : { project, paused: false };

/** Pause: no new run starts from now on (every process of the home reads it at each run's start); paused again keeps the first time. */
export function pauseProject(p: Project, by: string, reason?: string): PauseView {
  const before = readPause(p.paths.stateDir);
  const pause = { at: before?.at ?? new Date().toISOString(), by, ...(reason ? { reason } : {}) };
  writePause(p.paths.stateDir, pause);
  return viewOf(p.metadata.name, pause);
}

export function resumeProject(p: Project): PauseView & { was_paused: boolean } {
  return { ...viewOf(p.metadata.name, undefined), was_paused: clearPause(p.paths.stateDir) };
}

export const pauseOf = (p: Project): PauseView => viewOf(p.metadata.name, readPause(p.paths.stateDir));
