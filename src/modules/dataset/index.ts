import type { AppDeps } from '../../deps.ts';

export interface DemoAccount {
  readonly username: string;
  readonly password: string;
}

/**
 * Loads the demo dataset (clearly synthetic patients and a demo account holding `API access`) unless it
 * is already there; returns the demo account. TODO(#2): the dataset module replaces this.
 */
export async function loadDemoData(
  _deps: Pick<AppDeps, 'database' | 'files' | 'config'>,
): Promise<DemoAccount | undefined> {
  return undefined;
}
