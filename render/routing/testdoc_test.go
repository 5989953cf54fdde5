package routing

import "testing"

// sampleDocument is the document of docs/design.md §2, sealed.
func sampleDocument() *Document {
	d := &Document{
		Routes: []Route{
			{Host: "*.shop.example.org", Application: "shop", Upstreams: []Upstream{
				{Node: "vps-a", Address: "10.83.0.1:24417", APIPort: 7400},
				{Node: "vps-b", Address: "10.83.0.2:24902", APIPort: 7400},
			}},
			{Host: "go.tito.io", Application: "tito-go", Upstreams: []Upstream{
				{Node: "vps-b", Address: "10.83.0.2:24600", APIPort: 7400},
			}, HealthPath: "/healthz"},
			{Host: "shop.apps.example.com", Application: "shop", Upstreams: []Upstream{
				{Node: "vps-a", Address: "10.83.0.1:24417", APIPort: 7400},
				{Node: "vps-b", Address: "10.83.0.2:24902", APIPort: 7400},
			}},
			{Host: "ti.to", Application: "tito-classic", Upstreams: []Upstream{
				{Node: "vps-a", Address: "10.83.0.1:24500", APIPort: 7400},
				{Node: "vps-c", Address: "10.83.0.3:24500", APIPort: 7400},
				{Node: "vps-b", Address: "10.83.0.2:24500", APIPort: 7400},
			}, Paths: map[string]string{"paulca": "go.tito.io", "bigcorp": "go.tito.io"}},
		},
		API: &API{
			Hosts: []string{"apps.example.com"},
			Upstreams: []Upstream{
				{Node: "vps-a", Address: "10.83.0.1:7400", APIPort: 7400},
				{Node: "vps-b", Address: "10.83.0.2:7400", APIPort: 7400},
				{Node: "vps-c", Address: "10.83.0.3:7400", APIPort: 7400},
			},
			Denied: []string{"/v1/storage", "/v1/ingress/routes"}, // the first design's two (docs/design.md §2 now shows all five)
		},
	}
	d.Seal()
	return d
}

// cloneDocument deep-copies d, so a test can mutate one field of the copy.
func cloneDocument(d *Document) *Document {
	out := *d
	out.Routes = make([]Route, len(d.Routes))
	for i, r := range d.Routes {
		r.Upstreams = append([]Upstream(nil), r.Upstreams...)
		if r.Paths != nil {
			m := make(map[string]string, len(r.Paths))
			for k, v := range r.Paths {
				m[k] = v
			}
			r.Paths = m
		}
		out.Routes[i] = r
	}
	if d.API != nil {
		api := *d.API
		api.Hosts = append([]string(nil), api.Hosts...)
		api.Upstreams = append([]Upstream(nil), api.Upstreams...)
		api.Denied = append([]string(nil), api.Denied...)
		out.API = &api
	}
	return &out
}

// mustMarshal is Marshal(d), failing the test on an error.
func mustMarshal(t testing.TB, d *Document) []byte {
	t.Helper()
	b, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
