/**
 * Who calls the console: the admin token in a header, or a browser signed in with a console login.
 * canAct is the one place that decides whether they may act (stop, pause, delete, revoke, approve,
 * answer): today every signed-in operator may; a sign-in with roles (a viewer) narrows it here.
 */
export type ConsoleCaller = { via: 'token' } | { via: 'login'; login: string };

export function canAct(caller: ConsoleCaller): boolean {
  return caller.via === 'token' || caller.via === 'login';
}

/** The key a caller's live connections are counted under (one per login; the token is one caller). */
export const callerKey = (caller: ConsoleCaller): string => (caller.via === 'login' ? `login:${caller.login}` : 'token');
