import type { Rule } from 'eslint';

/** A lower place (`files`) and the higher ones it may never reach (`forbidden`), paths from the root. */
export interface Layer {
  readonly files: readonly string[];
  readonly forbidden: readonly string[];
  readonly message: string;
}

export const noUpwardImport: Rule.RuleModule;
export const PROJECT_LAYERS: readonly Layer[];
