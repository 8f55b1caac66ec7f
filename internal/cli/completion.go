package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// bash and zsh completion ask the binary itself (urfave/cli's
// --generate-bash-completion), so they always match the installed verbs.
const bashCompletion = `# bash completion for kaimon
_kaimon_complete() {
  local cur words
  cur="${COMP_WORDS[COMP_CWORD]}"
  if [[ "$cur" == -* ]]; then
    words=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    words=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
  return 0
}
complete -o bashdefault -o default -F _kaimon_complete kaimon
`

const zshCompletion = `#compdef kaimon
_kaimon() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _kaimon kaimon
`

// Completion returns the completion script for shell.
func Completion(app *cli.App, shell string) (string, error) {
	switch shell {
	case "bash":
		return bashCompletion, nil
	case "zsh":
		return zshCompletion, nil
	case "fish":
		return app.ToFishCompletion()
	}
	return "", fmt.Errorf("unknown shell %q: use bash, zsh or fish", shell)
}
