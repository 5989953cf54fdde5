// Command echo is the demo's upstream application: it answers every request with its
// name and the path it was asked for ("tito-go@a /paulca/events"), so a curl through
// Traefik shows which application, on which node, served it. GET /healthz answers "ok".
//
//	echo -name tito-go@a -listen 127.0.0.2:24001
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
)

func main() {
	name := flag.String("name", "echo", "the name every answer starts with")
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", *name, r.URL.Path)
	})
	log.Fatal(http.ListenAndServe(*listen, mux))
}
