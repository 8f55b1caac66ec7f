package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/schema"
)

// subjects are schema.Subjects as an error lists them: a, b or c.
func subjects() string {
	s := schema.Subjects
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func schemaCmd() *cli.Command {
	return &cli.Command{
		Name:      "schema",
		Usage:     "Print the JSON Schema of the events or the verbs, or the API's OpenAPI description",
		ArgsUsage: strings.Join(schema.Subjects, "|"),
		Description: "events: JSON Schema (draft 2020-12) of the event envelope that kaimon tail prints and the bus carries, " +
			"each kind's data in $defs, and of a line of an agent's event log ($defs/record); kaimon-events(7) describes them.\n" +
			"verbs: each verb's arguments and result ($defs/<verb>_args, $defs/<verb>_result), as --json prints a result " +
			"and the MCP tools take and return them, and the error object ($defs/error).\n" +
			"openapi: an OpenAPI 3.1 description of kaimon-agentd's HTTP API on its socket.\n\n" +
			"The documents are made from the code that encodes what they describe; this needs no daemon.",
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, "one subject: "+subjects()); err != nil {
				return err
			}
			doc, ok := schema.Document(c.Args().First())
			if !ok {
				return usagef("no schema %q: the subjects are %s", c.Args().First(), subjects())
			}
			var b bytes.Buffer
			if err := json.Indent(&b, doc, "", "  "); err != nil {
				return err
			}
			_, err := fmt.Fprintf(c.App.Writer, "%s\n", b.Bytes())
			return err
		},
	}
}
