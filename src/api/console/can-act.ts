import type { ConsoleLogin } from '../../store/console-logins.js';

/**
 * Who calls the console: the admin token in a header, or a browser signed in with a console login
 * (the admin token's form: an operator; the organisation's provider: an operator or a viewer, by
 * berth.yaml oidc). canAct is the one place that decides whether they may act (stop, pause,
 * delete, revoke, approve, answer): the token and operators may; a viewer only looks.
 */
export type ConsoleCaller = { via: 'token' } | ({ via: 'login'; login: string } & ConsoleLogin);

export function canAct(caller: ConsoleCaller): boolean {
  return caller.via === 'token' || caller.role === 'operator';
}

/** The key a caller's live connections are counted under (one per login; the token is one caller). */
export const callerKey = (caller: ConsoleCaller): string => (caller.via === 'login' ? `login:${caller.login}` : 'token');

/** What the page is told of its own caller (it hides what a viewer cannot do). */
export const youOf = (caller: ConsoleCaller) =>
  caller.via === 'token'
    ? { role: 'operator', can_act: true }
    : { role: caller.role, ...(caller.who ? { who: caller.who } : {}), can_act: canAct(caller) };
