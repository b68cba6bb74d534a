package cdnsim

// city is a place a PoP or clients may stand, with its coordinates in
// degrees (north and east positive).
type city struct {
	name     string
	lat, lon float64
}

// cities are 100 large metropolitan areas on every continent, the kind of
// places CDNs put PoPs. Coordinates are approximate city centres (to a
// tenth of a degree), typed from general knowledge for this project: facts,
// not copied from a licensed data set.
var cities = []city{
	{"new-york", 40.7, -74.0}, {"los-angeles", 34.1, -118.2}, {"chicago", 41.9, -87.6}, {"houston", 29.8, -95.4},
	{"phoenix", 33.4, -112.1}, {"philadelphia", 40.0, -75.2}, {"dallas", 32.8, -96.8}, {"san-jose", 37.3, -121.9},
	{"seattle", 47.6, -122.3}, {"denver", 39.7, -105.0}, {"washington", 38.9, -77.0}, {"boston", 42.4, -71.1},
	{"atlanta", 33.7, -84.4}, {"miami", 25.8, -80.2}, {"minneapolis", 45.0, -93.3}, {"orlando", 28.5, -81.4},
	{"toronto", 43.7, -79.4}, {"montreal", 45.5, -73.6}, {"vancouver", 49.3, -123.1}, {"calgary", 51.0, -114.1},
	{"mexico-city", 19.4, -99.1}, {"guadalajara", 20.7, -103.3}, {"bogota", 4.7, -74.1}, {"lima", -12.0, -77.0},
	{"santiago", -33.4, -70.7}, {"buenos-aires", -34.6, -58.4}, {"sao-paulo", -23.6, -46.6}, {"rio-de-janeiro", -22.9, -43.2},
	{"caracas", 10.5, -66.9}, {"panama-city", 9.0, -79.5}, {"london", 51.5, -0.1}, {"paris", 48.9, 2.4},
	{"frankfurt", 50.1, 8.7}, {"amsterdam", 52.4, 4.9}, {"brussels", 50.8, 4.4}, {"madrid", 40.4, -3.7},
	{"barcelona", 41.4, 2.2}, {"lisbon", 38.7, -9.1}, {"rome", 41.9, 12.5}, {"milan", 45.5, 9.2},
	{"zurich", 47.4, 8.5}, {"vienna", 48.2, 16.4}, {"berlin", 52.5, 13.4}, {"munich", 48.1, 11.6},
	{"copenhagen", 55.7, 12.6}, {"stockholm", 59.3, 18.1}, {"oslo", 59.9, 10.8}, {"helsinki", 60.2, 24.9},
	{"warsaw", 52.2, 21.0}, {"prague", 50.1, 14.4}, {"budapest", 47.5, 19.0}, {"bucharest", 44.4, 26.1},
	{"athens", 38.0, 23.7}, {"istanbul", 41.0, 29.0}, {"kyiv", 50.5, 30.5}, {"moscow", 55.8, 37.6},
	{"saint-petersburg", 59.9, 30.3}, {"dublin", 53.3, -6.3}, {"manchester", 53.5, -2.2}, {"marseille", 43.3, 5.4},
	{"cairo", 30.0, 31.2}, {"lagos", 6.5, 3.4}, {"nairobi", -1.3, 36.8}, {"johannesburg", -26.2, 28.0},
	{"cape-town", -33.9, 18.4}, {"casablanca", 33.6, -7.6}, {"accra", 5.6, -0.2}, {"addis-ababa", 9.0, 38.7},
	{"dubai", 25.2, 55.3}, {"riyadh", 24.7, 46.7}, {"tel-aviv", 32.1, 34.8}, {"tehran", 35.7, 51.4},
	{"karachi", 24.9, 67.0}, {"mumbai", 19.1, 72.9}, {"delhi", 28.6, 77.2}, {"bangalore", 13.0, 77.6},
	{"chennai", 13.1, 80.3}, {"kolkata", 22.6, 88.4}, {"dhaka", 23.8, 90.4}, {"bangkok", 13.8, 100.5},
	{"singapore", 1.3, 103.8}, {"kuala-lumpur", 3.1, 101.7}, {"jakarta", -6.2, 106.8}, {"manila", 14.6, 121.0},
	{"ho-chi-minh-city", 10.8, 106.7}, {"hong-kong", 22.3, 114.2}, {"taipei", 25.0, 121.6}, {"shanghai", 31.2, 121.5},
	{"beijing", 39.9, 116.4}, {"guangzhou", 23.1, 113.3}, {"seoul", 37.6, 127.0}, {"tokyo", 35.7, 139.7},
	{"osaka", 34.7, 135.5}, {"sydney", -33.9, 151.2}, {"melbourne", -37.8, 145.0}, {"brisbane", -27.5, 153.0},
	{"perth", -32.0, 115.9}, {"auckland", -36.8, 174.8}, {"honolulu", 21.3, -157.9}, {"anchorage", 61.2, -149.9},
}
