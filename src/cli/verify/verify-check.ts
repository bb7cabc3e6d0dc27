/** One line of `berth verify`: a boundary that held, one that did not (escape), or a check that could not run. */
export interface VerifyCheck {
  name: string;
  status: 'ok' | 'escape' | 'error';
  detail: string;
}
