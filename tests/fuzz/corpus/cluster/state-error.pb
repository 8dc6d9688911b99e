"
h1h1:1deadline