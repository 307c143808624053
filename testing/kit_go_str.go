// kit_go_str.go -- the oracle for json_put_str_go(): prints what Go's
// encoding/json Marshal writes for a string, as Ollama's routes write every
// answer (gin's c.JSON and streamResponse both call json.Marshal).
//
// Input: one string per line on stdin as hex digits of its bytes (an empty
// line is the empty string). Output: one line per input, Marshal's bytes as
// hex. Exit 2 on a malformed line. Run by testing/oracle_json_str.py with
// `go run` when a Go toolchain is installed (Debian 12: golang-go, Go 1.19;
// that suite maps the one difference from the Go >= 1.22 Ollama is built
// with: \b and \f, which Go 1.19 writes as \u0008 and \u000c).
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for {
		line, err := in.ReadString('\n')
		if len(line) == 0 && err != nil {
			return
		}
		if line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		b, herr := hex.DecodeString(line)
		if herr != nil {
			fmt.Fprintln(os.Stderr, "kit-go-str: bad hex:", herr)
			os.Exit(2)
		}
		d, _ := json.Marshal(string(b))
		fmt.Fprintln(out, hex.EncodeToString(d))
		if err != nil {
			return
		}
	}
}
