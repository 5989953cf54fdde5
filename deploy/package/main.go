// Command package builds the project's Debian packages with nfpm: scafo-node (the node,
// its unit and configuration, the deploy recipe, the Traefik integration) and
// scafo-caddy (Caddy with scafo's modules). What goes into each is its nfpm
// configuration beside this file (scafo-node.yaml, scafo-caddy.yaml), read with
// ${VERSION}, ${ARCH} and ${BINDIR} taken from the flags.
//
//	go run . -root ../.. -version 1.2.3 -arch arm64 -bin dist/arm64 -out dist scafo-node scafo-caddy
//
// `make package` runs it for amd64 and arm64 with the version the binaries carry
// (deploy/package/version.sh). It is a Go module of its own: nfpm's dependency tree
// (about 120 modules) stays out of the node's.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

// debVersion is a Debian upstream version without a revision: it starts with a digit
// and holds only [A-Za-z0-9.+~] (deb-version(7)).
var debVersion = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

// varRef is a ${NAME} in a configuration.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func run() error {
	root := flag.String("root", ".", "the repository's root (the configurations' paths are relative to it)")
	version := flag.String("version", "", "the package version (deploy/package/version.sh)")
	arch := flag.String("arch", "", "the Debian architecture: amd64 or arm64")
	bin := flag.String("bin", "", "the directory holding the binaries for arch (scafo-node, caddy), from root")
	out := flag.String("out", "dist", "where the .deb files are written, from root")
	flag.Parse()
	names := flag.Args()
	if len(names) == 0 {
		names = []string{"scafo-node", "scafo-caddy"}
	}
	if !debVersion.MatchString(*version) {
		return fmt.Errorf("-version %q is not a Debian version (a digit first, then letters, digits, '.', '+' or '~')", *version)
	}
	switch *arch {
	case "amd64", "arm64":
	default:
		return fmt.Errorf("-arch %q: want amd64 or arm64", *arch)
	}
	if *bin == "" {
		return errors.New("-bin is required")
	}
	if err := os.Chdir(*root); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	vars := map[string]string{"VERSION": *version, "ARCH": *arch, "BINDIR": *bin}
	for _, name := range names {
		path, err := build(name, vars, *out)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Println(path)
	}
	return nil
}

// build writes <out>/<name>_<version>_<arch>.deb from deploy/package/<name>.yaml.
func build(name string, vars map[string]string, out string) (string, error) {
	file := filepath.Join("deploy", "package", name+".yaml")
	text, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	// Every variable the configuration names is one of ours: an unknown one is a typo.
	for _, m := range varRef.FindAllStringSubmatch(string(text), -1) {
		if _, ok := vars[m[1]]; !ok {
			return "", fmt.Errorf("%s names ${%s}: only VERSION, ARCH and BINDIR are set", file, m[1])
		}
	}
	// nfpm also asks for variables of its own (NFPM_PASSPHRASE, ...): unset here.
	cfg, err := nfpm.ParseFileWithEnvMapping(file, func(k string) string { return vars[k] })
	if err != nil {
		return "", err
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.Validate(info); err != nil {
		return "", err
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, pkg.ConventionalFileName(info))
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(f.Name(), path)
}
